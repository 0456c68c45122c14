#include "core/thread_pool.h"

#include <fstream>
#include <set>
#include <string>

namespace autoglm {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_share(int index) {
  const int64_t chunk = (job_n_ + n_threads_ - 1) / n_threads_;
  const int64_t begin = int64_t(index) * chunk;
  const int64_t end = std::min(job_n_, begin + chunk);
  if (begin < end) (*job_)(index, begin, end);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, 0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    pending_ = n_threads_ - 1;
    ++generation_;
  }
  wake_.notify_all();
  run_share(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    run_share(index);
    std::lock_guard<std::mutex> lock(mutex_);
    if (--pending_ == 0) done_.notify_one();
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
