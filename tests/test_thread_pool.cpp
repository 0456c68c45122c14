// The thread pool: every share of a parallel_for runs exactly once over the same split,
// whoever claims it (workers, or the caller for a worker that is slow to wake).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace autoglm {
namespace {

struct Range {
  int64_t begin = -1, end = -1;
  int runs = 0;
};

// The ranges each share index got in one call.
std::vector<Range> ranges_of_one_call(ThreadPool& pool, int64_t n) {
  std::vector<Range> got(size_t(pool.size()));
  std::mutex m;
  pool.parallel_for(n, [&](int share, int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(m);
    ASSERT_GE(share, 0);
    ASSERT_LT(share, pool.size());
    got[size_t(share)] = {b, e, got[size_t(share)].runs + 1};
  });
  return got;
}

TEST(ThreadPool, EveryShareRunsOnceOverTheStaticSplit) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {int64_t(1), int64_t(2), int64_t(3), int64_t(7), int64_t(100), int64_t(1001)}) {
      const auto got = ranges_of_one_call(pool, n);
      const int64_t chunk = (n + pool.size() - 1) / pool.size();
      int64_t covered = 0;
      for (int s = 0; s < pool.size(); ++s) {
        const int64_t b = s * chunk, e = std::min(n, b + chunk);
        if (n == 1 || threads == 1) {  // run inline as one share
          if (s == 0) {
            EXPECT_EQ(got[0].end, n);
          }
          continue;
        }
        if (b >= e) {
          EXPECT_EQ(got[size_t(s)].runs, 0) << "empty share " << s;
          continue;
        }
        EXPECT_EQ(got[size_t(s)].runs, 1) << threads << " threads, n " << n << ", share " << s;
        EXPECT_EQ(got[size_t(s)].begin, b);
        EXPECT_EQ(got[size_t(s)].end, e);
        covered += e - b;
      }
      if (n > 1 && threads > 1) {
        EXPECT_EQ(covered, n);
      }
    }
  }
}

TEST(ThreadPool, BackToBackCallsNeverRunAShareTwiceOrSkipOne) {
  // Many tiny jobs: workers wake late and race the caller for shares of the next job.
  ThreadPool pool(3);
  for (int call = 0; call < 20000; ++call) {
    std::vector<std::atomic<int>> runs(3);
    pool.parallel_for(3, [&](int share, int64_t, int64_t) { runs[size_t(share)].fetch_add(1); });
    for (int s = 0; s < 3; ++s) ASSERT_EQ(runs[size_t(s)].load(), 1) << "call " << call << ", share " << s;
  }
}

TEST(ThreadPool, BackToBackJobsOfDifferentShareCountsNeverRunAShareTwiceOrSkipOne) {
  // A late worker's claim on a job of few shares must not land in the next job of more.
  ThreadPool pool(3);
  for (int call = 0; call < 20000; ++call) {
    const int shares = 3 + call % 6;
    std::vector<std::atomic<int>> runs(static_cast<size_t>(shares));
    pool.parallel_for_shares(64, shares, [&](int share, int64_t, int64_t) { runs[size_t(share)].fetch_add(1); });
    for (int s = 0; s < shares; ++s) ASSERT_EQ(runs[size_t(s)].load(), 1) << "call " << call << ", share " << s;
  }
}

// The shares of parallel_for_shares go to whichever thread is free: while one thread is held
// in share 0, the other runs all the rest (with shares fixed to threads it would wait forever).
TEST(ThreadPool, SharesAreClaimedByWhicheverThreadIsFree) {
  ThreadPool pool(2);
  constexpr int kShares = 8;
  constexpr int64_t kN = 100;
  std::vector<Range> got(kShares);
  std::mutex m;
  std::atomic<int> others_done{0};
  bool held_share_saw_the_rest = false;
  pool.parallel_for_shares(kN, kShares, [&](int share, int64_t b, int64_t e) {
    if (share == 0) {  // bounded: a failure is a message below, not a hang
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (others_done.load() < kShares - 1 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      held_share_saw_the_rest = others_done.load() == kShares - 1;
    }
    {
      std::lock_guard<std::mutex> lock(m);
      got[size_t(share)] = {b, e, got[size_t(share)].runs + 1};
    }
    if (share != 0) others_done.fetch_add(1);
  });
  EXPECT_TRUE(held_share_saw_the_rest) << "the free thread did not take the other shares";
  const int64_t chunk = (kN + kShares - 1) / kShares;
  for (int s = 0; s < kShares; ++s) {
    EXPECT_EQ(got[size_t(s)].runs, 1) << "share " << s;
    EXPECT_EQ(got[size_t(s)].begin, s * chunk);
    EXPECT_EQ(got[size_t(s)].end, std::min(kN, (s + 1) * chunk));
  }
}

// Fewer units than shares leaves shares empty (not called); fewer shares than threads are raised
// to one a thread; one thread, or n == 1, is one call over [0, n).
TEST(ThreadPool, SharesCoverEveryUnitOnceWhateverTheirCount) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {int64_t(1), int64_t(5), int64_t(64)})
      for (int shares : {1, 2, 8}) {
        std::vector<std::atomic<int>> covered(static_cast<size_t>(n));
        std::atomic<int> calls{0}, empty_calls{0}, max_share{-1};
        pool.parallel_for_shares(n, shares, [&](int share, int64_t b, int64_t e) {
          calls.fetch_add(1);
          if (b >= e) empty_calls.fetch_add(1);
          int seen = max_share.load();
          while (share > seen && !max_share.compare_exchange_weak(seen, share)) {
          }
          for (int64_t i = b; i < e; ++i) covered[size_t(i)].fetch_add(1);
        });
        const std::string where =
            std::to_string(threads) + " threads, n " + std::to_string(n) + ", " + std::to_string(shares) + " shares";
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(covered[size_t(i)].load(), 1) << where << ", unit " << i;
        EXPECT_EQ(empty_calls.load(), 0) << where;
        const int expected_shares = threads == 1 || n == 1 ? 1 : std::max(shares, threads);
        EXPECT_LT(max_share.load(), expected_shares) << where;
        if (threads > 1 && n >= expected_shares) {
          EXPECT_EQ(calls.load(), expected_shares) << where;
        }
      }
  }
}

TEST(ThreadPool, CallersOnSeveralThreadsTakeTurns) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int i = 0; i < 500; ++i) pool.parallel_for(10, [&](int, int64_t b, int64_t e) { total.fetch_add(e - b); });
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 500 * 10);
}

// Turns are fair by time: when a turn ends, the waiting seat that has held turns the least
// goes next, whoever asked first; one that asks alone gets its turn at once.
TurnQueue::Turn hold_for(TurnQueue::Seat& seat, std::chrono::milliseconds how_long) {
  auto turn = seat.take();
  std::this_thread::sleep_for(how_long);
  return turn;
}

TEST(TurnQueue, TheSeatThatHeldTurnsLeastGoesNext) {
  TurnQueue turns;
  TurnQueue::Seat busy(turns), quiet(turns), gate(turns);
  { auto t = quiet.take(); }                                   // quiet has held next to nothing,
  { auto t = hold_for(busy, std::chrono::milliseconds(30)); }  // busy 30 ms
  std::mutex order_mutex;
  std::vector<std::string> order;
  auto ask = [&](TurnQueue::Seat& seat, const std::string& name) {
    auto turn = seat.take();
    std::lock_guard<std::mutex> lock(order_mutex);
    order.push_back(name);
  };
  std::vector<std::thread> callers;
  {
    auto held = gate.take();
    callers.emplace_back(ask, std::ref(busy), "busy");  // asks first...
    while (turns.waiting() < 1) std::this_thread::yield();
    callers.emplace_back(ask, std::ref(quiet), "quiet");
    while (turns.waiting() < 2) std::this_thread::yield();
  }  // ...but quiet has held less: it goes first
  for (auto& t : callers) t.join();
  EXPECT_EQ(order, (std::vector<std::string>{"quiet", "busy"}));
  EXPECT_EQ(turns.waiting(), 0);
}

// A seat that keeps working (yielding between units) keeps the turn while it has held less
// than the seats waiting: a model with short steps takes several while one with long steps
// waits for one.
TEST(TurnQueue, AWorkingSeatKeepsTheTurnWhileItIsOwedTime) {
  TurnQueue turns;
  TurnQueue::Seat slow(turns), fast(turns), gate(turns);
  { auto t = fast.take(); }                                     // fast has held next to nothing,
  { auto t = hold_for(slow, std::chrono::milliseconds(200)); }  // slow far ahead, however slow the machine
  std::vector<std::string> order;
  std::mutex order_mutex;
  auto record = [&](const char* who) {
    std::lock_guard<std::mutex> lock(order_mutex);
    order.push_back(who);
  };
  std::vector<std::thread> callers;
  {
    auto held = gate.take();
    callers.emplace_back([&] {
      auto turn = slow.take();
      record("slow");
    });
    while (turns.waiting() < 1) std::this_thread::yield();
    callers.emplace_back([&] {
      auto turn = fast.take();
      for (int i = 0; i < 3; ++i) {  // three short units, still under slow's 200 ms
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        record("fast");
        turn.yield();
      }
    });
    while (turns.waiting() < 2) std::this_thread::yield();
  }  // fast (next to no time) goes first
  for (auto& t : callers) t.join();
  EXPECT_EQ(order, (std::vector<std::string>{"fast", "fast", "fast", "slow"}));
}

TEST(TurnQueue, AYieldingSeatHandsOverOnceItHasHeldMore) {
  TurnQueue turns;
  TurnQueue::Seat a(turns), b(turns);
  std::vector<std::string> order;
  std::mutex order_mutex;
  auto record = [&](const char* who) {
    std::lock_guard<std::mutex> lock(order_mutex);
    order.push_back(who);
  };
  auto turn = a.take();
  std::thread other([&] {
    auto t = b.take();
    record("b");
  });
  while (turns.waiting() < 1) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  record("a");
  turn.yield();  // a has held 5 ms, b none: b goes, then a again
  record("a");
  other.join();
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "a"}));
}

TEST(TurnQueue, TiesGoInTheOrderAskedAndIdlingBanksNoCredit) {
  TurnQueue turns;
  TurnQueue::Seat a(turns), b(turns), c(turns), gate(turns);
  std::vector<std::string> order;
  std::mutex order_mutex;
  auto ask = [&](TurnQueue::Seat& seat, const std::string& name) {
    auto turn = seat.take();
    std::lock_guard<std::mutex> lock(order_mutex);
    order.push_back(name);
  };
  { auto t = hold_for(gate, std::chrono::milliseconds(20)); }  // gate has held 20 ms; a, b and c none
  std::vector<std::thread> callers;
  {
    auto held = gate.take();
    // Each of a, b, c comes from idle to the least time of the seats in use (gate's 20 ms), so
    // all tie: the order asked decides.
    int n = 0;
    for (auto [seat, name] : {std::pair{&c, "c"}, std::pair{&a, "a"}, std::pair{&b, "b"}}) {
      callers.emplace_back(ask, std::ref(*seat), name);
      ++n;
      while (turns.waiting() < n) std::this_thread::yield();
    }
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(order, (std::vector<std::string>{"c", "a", "b"}));
}

// A seat that arrives while the one working seat is between turns (an engine sampling between
// two steps: it holds no turn and waits for none) starts from that seat's time, not from zero:
// else it would keep the turn until it had held as long as the engine ever had.
TEST(TurnQueue, ANewSeatStartsFromASeatBetweenItsTurns) {
  TurnQueue turns;
  TurnQueue::Seat engine(turns);
  { auto t = hold_for(engine, std::chrono::milliseconds(200)); }  // between turns now, not idle
  TurnQueue::Seat image(turns);
  std::vector<std::string> order;
  std::mutex order_mutex;
  auto record = [&](const char* who) {
    std::lock_guard<std::mutex> lock(order_mutex);
    order.push_back(who);
  };
  auto turn = image.take();  // starts at the engine's 200 ms
  std::thread next_step([&] {
    auto t = engine.take();
    record("engine");
  });
  while (turns.waiting() < 1) std::this_thread::yield();
  record("image");
  turn.yield();  // the image has held at least the engine's time (a tie goes to the waiter): the engine goes next
  record("image");
  next_step.join();
  EXPECT_EQ(order, (std::vector<std::string>{"image", "engine", "image"}));
}

}  // namespace
}  // namespace autoglm
