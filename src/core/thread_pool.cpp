#include "core/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AUTOGLM_CPU_RELAX() _mm_pause()
#else
#define AUTOGLM_CPU_RELAX() ((void)0)
#endif
#include <set>
#include <string>

namespace autoglm {
namespace {

constexpr int kSpinIterations = 20000;  // roughly 50-100 microseconds

// Spins until pred() holds or the budget runs out; true if it holds.
template <typename Pred>
bool spin_until(Pred pred) {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (pred()) return true;
    AUTOGLM_CPU_RELAX();
  }
  return pred();
}

// Pinned, worker i runs on the i-th CPU this process may use (when there are
// at least as many CPUs as threads), keeping its caches and its share of every matrix. Off by
// default: on a 2-vCPU VM pinning measured slower (prefill 95 vs 115 tok/s; pinning the
// calling thread as well cut decode from 28 to 7), as the hypervisor moves vCPUs anyway.
void pin_to_allowed_cpu(int index, int n_threads) {
#if defined(__linux__)
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) < n_threads) return;
  int seen = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (seen++ == index) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
      return;
    }
  }
#else
  (void)index, (void)n_threads;
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, bool pin_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i)
    workers_.emplace_back([this, i, pin_threads] {
      if (pin_threads) pin_to_allowed_cpu(i, n_threads_);
      worker_loop(i);
    });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

bool ThreadPool::run_one_share() {
  // A claim past the last share leaves job_ alone: the job may already have ended.
  const uint64_t claim = claims_.fetch_add(1, std::memory_order_acq_rel);
  const int64_t shares = int64_t(claim >> 32), share = int64_t(claim & 0xffffffffu);
  if (share >= shares) return false;
  const int64_t chunk = (job_n_ + shares - 1) / shares;
  const int64_t begin = int64_t(share) * chunk;
  const int64_t end = std::min(job_n_, begin + chunk);
  if (begin < end) (*job_)(int(share), begin, end);
  if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    std::lock_guard<std::mutex> lock(mutex_);
    done_.notify_one();
  }
  return true;
}

void ThreadPool::parallel_for(int64_t n, FunctionRef<void(int, int64_t, int64_t)> fn) {
  parallel_for_shares(n, n_threads_, fn);
}

void ThreadPool::parallel_for_shares(int64_t n, int shares, FunctionRef<void(int, int64_t, int64_t)> fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, 0, n);
    return;
  }
  std::lock_guard<std::mutex> turn(call_mutex_);
  job_ = &fn;
  job_n_ = n;
  shares = std::max(shares, n_threads_);
  pending_.store(shares, std::memory_order_relaxed);
  claims_.store(uint64_t(shares) << 32, std::memory_order_release);  // publishes job_ and job_n_ to claimers
  {
    std::lock_guard<std::mutex> lock(mutex_);  // orders the bump against sleeping workers' checks
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  // The caller claims shares too: one that no worker has claimed by the time the caller is
  // free belongs to a worker that is asleep or off the CPU, and waiting for it would stall
  // every stream in the step by a scheduler time slice.
  auto all_done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  while (run_one_share()) {
  }
  if (!spin_until(all_done)) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  claims_.store(0, std::memory_order_release);  // late workers find nothing to claim
  job_ = nullptr;
}

void ThreadPool::worker_loop(int) {
  uint64_t seen = 0;
  for (;;) {
    auto has_job = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(has_job)) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || has_job(); });
      if (stopping_) return;
    }
    seen = generation_.load(std::memory_order_acquire);
    while (run_one_share()) {
    }
  }
}

int physical_core_count() {
  // Each logical CPU lists its core's siblings; distinct lists are distinct cores.
  std::set<std::string> cores;
  for (unsigned cpu = 0; cpu < 4096; ++cpu) {
    std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
    if (!f) break;
    std::string siblings;
    std::getline(f, siblings);
    cores.insert(siblings);
  }
  if (!cores.empty()) return int(cores.size());
  const unsigned hw = std::thread::hardware_concurrency();
  return hw ? int(hw) : 1;
}

}  // namespace autoglm
