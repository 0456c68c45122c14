// The thread pool: every share of a parallel_for runs exactly once over the same split,
// whoever claims it (workers, or the caller for a worker that is slow to wake).
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
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

// Turns go first come, first served: a caller that releases its turn and asks again waits
// behind those already waiting (a std::mutex could hand it straight back).
TEST(TurnQueue, TurnsGoInTheOrderTheyWereAskedFor) {
  TurnQueue turns;
  std::mutex order_mutex;
  std::vector<int> order;
  auto wait_until_waiting = [&](int64_t n) {
    while (turns.waiting() < n) std::this_thread::yield();
  };
  std::vector<std::thread> callers;
  {
    auto first = turns.take();
    EXPECT_EQ(turns.waiting(), 0);
    for (int c = 0; c < 3; ++c) {
      callers.emplace_back([&, c] {
        auto turn = turns.take();
        std::lock_guard<std::mutex> lock(order_mutex);
        order.push_back(c);
      });
      wait_until_waiting(c + 1);  // caller c holds its ticket before the next one asks
    }
  }  // the first turn ends: the three go in the order they asked
  for (auto& t : callers) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(turns.waiting(), 0);
}

}  // namespace
}  // namespace autoglm
