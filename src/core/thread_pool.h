// One persistent pool of worker threads shared by every parallel kernel.
// The calling thread takes part in the work, so a pool of N threads runs N-1 workers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "core/function_ref.h"
#include "core/turn_queue.h"

namespace autoglm {

class ThreadPool {
 public:
  // pin_threads: worker i runs on the i-th CPU this process may use (when there are at least
  // as many CPUs as threads).
  explicit ThreadPool(int n_threads, bool pin_threads = false);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(share, begin, end) over [0, n) split into size() contiguous shares; returns
  // when all are done. Each share runs on exactly one thread (share indexes per-share
  // scratch), but not necessarily its own: threads claim shares, so when a worker is kept
  // off the CPU by other work the caller runs its share instead of waiting for it. The
  // split, and so every result, does not depend on who runs what. Callers on different
  // threads take turns; fn must not call parallel_for itself.
  // fn is only referenced: it must outlive the call (a lambda argument does).
  void parallel_for(int64_t n, FunctionRef<void(int, int64_t, int64_t)> fn);
  // As parallel_for, over `shares` contiguous shares (raised to size() if fewer) that the threads
  // claim in order as they come free: a thread slowed by a busy CPU runs fewer of them, and the
  // others do not wait for it. The shares' bounds depend on n and the share count alone (one
  // thread, or n == 1: one call over [0, n) as share 0); an empty share is not called.
  void parallel_for_shares(int64_t n, int shares, FunctionRef<void(int, int64_t, int64_t)> fn);
  // Turns for callers that issue many jobs as one unit of work (an engine step): callers on
  // different threads then take whole units in turn, fairly by time (see TurnQueue).
  TurnQueue& turns() { return turns_; }

 private:
  void worker_loop(int index);
  bool run_one_share();  // claims and runs one share; false when none is left

  int n_threads_;
  TurnQueue turns_;
  std::vector<std::thread> workers_;
  // A new job bumps generation_; workers spin on it briefly before sleeping, since a
  // decode step issues hundreds of small jobs and a sleep/wake costs more than the job.
  std::mutex call_mutex_;  // one job at a time
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::atomic<uint64_t> generation_{0};
  // The current job's share count (high 32 bits) and its next unclaimed share (low 32 bits), in
  // one word: a claim reads both at once, so a worker late from one job can never take a share
  // of the next by its count. Between jobs the count is 0.
  std::atomic<uint64_t> claims_{0};
  std::atomic<int> pending_{0};  // shares not yet finished
  bool stopping_ = false;
  int64_t job_n_ = 0;
  const FunctionRef<void(int, int64_t, int64_t)>* job_ = nullptr;
};

// Number of physical cores (hyper-threads counted once); at least 1.
int physical_core_count();

}  // namespace autoglm
