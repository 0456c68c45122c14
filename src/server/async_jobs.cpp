#include "server/async_jobs.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include <xxhash.h>

#include "core/last_resort.h"
#include "core/log.h"
#include "core/random_id.h"

namespace autoglm {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string AsyncJobs::owner_of(const std::string& api_key) {
  if (api_key.empty()) return "";
  char id[24];
  std::snprintf(id, sizeof(id), "key-%016llx",
                static_cast<unsigned long long>(XXH64(api_key.data(), api_key.size(), 0)));
  return id;
}

Result<std::unique_ptr<AsyncJobs>> AsyncJobs::start(const JobsConfig& config, std::vector<std::string> keys,
                                                    RunJob run) {
  std::error_code ec;
  std::filesystem::create_directories(config.data_dir, ec);
  if (ec) return io_error("jobs.data_dir: " + config.data_dir + ": " + ec.message());
  AUTOGLM_ASSIGN_OR_RETURN(auto store, JobStore::open(config.data_dir + "/jobs.db"));
  AUTOGLM_ASSIGN_OR_RETURN(const std::vector<Job> left, store->unfinished());
  std::unique_ptr<AsyncJobs> jobs(new AsyncJobs(config, std::move(keys), std::move(run), std::move(store)));
  for (const Job& j : left) jobs->queue_.push_back(j.id);  // oldest first, as they came
  if (!left.empty())
    log_line(LogLevel::kInfo, "async jobs: resuming " + std::to_string(left.size()) + " unfinished job(s)");
  for (int i = 0; i < std::max(1, config.concurrency); ++i)
    jobs->runners_.emplace_back([p = jobs.get()] { p->runner(); });
  return jobs;
}

AsyncJobs::AsyncJobs(const JobsConfig& config, std::vector<std::string> keys, RunJob run,
                     std::unique_ptr<JobStore> store)
    : config_(config), keys_(std::move(keys)), run_(std::move(run)), store_(std::move(store)) {}

AsyncJobs::~AsyncJobs() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (auto& [id, run] : running_) run->cancel();
  }
  ready_.notify_all();
  for (auto& t : runners_) t.join();
}

std::string AsyncJobs::key_of_owner(const std::string& owner) const {
  for (const std::string& key : keys_)
    if (owner_of(key) == owner) return key;
  return "";
}

Result<Job> AsyncJobs::submit(const std::string& endpoint, const std::string& body, const std::string& api_key,
                              const std::string& metadata) {
  Job job;
  job.id = random_id("job_");
  job.endpoint = endpoint;
  job.body = body;
  job.owner = owner_of(api_key);
  job.metadata = metadata;
  job.created_at = now_seconds();
  AUTOGLM_RETURN_IF_ERROR(store_->add(job));  // durable before the client hears of it
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(job.id);
  }
  ready_.notify_one();
  return job;
}

std::optional<Job> AsyncJobs::get(const std::string& id, const std::string& api_key) {
  auto job = store_->get(id);
  if (!job || job->owner != owner_of(api_key)) return std::nullopt;
  return job;
}

Result<std::vector<Job>> AsyncJobs::list(const std::string& api_key, std::optional<JobStatus> status,
                                         const std::string& after, int64_t limit) {
  return store_->list(owner_of(api_key), status, after, limit);
}

std::optional<Job> AsyncJobs::cancel(const std::string& id, const std::string& api_key) {
  auto job = get(id, api_key);
  if (!job) return std::nullopt;
  if (!job_finished(job->status)) {
    auto ended = store_->finish(id, JobStatus::kCancelled, 499, "", now_seconds());
    if (!ended) log_line(LogLevel::kWarning, "async jobs: " + ended.status().message());
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = running_.find(id); it != running_.end()) it->second->cancel();
  }
  return store_->get(id);
}

int64_t AsyncJobs::queue_depth() {
  std::lock_guard<std::mutex> lock(mutex_);
  return int64_t(queue_.size());
}

void AsyncJobs::runner() {
  for (;;) {
    std::string id;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!ready_.wait_for(lock, std::chrono::seconds(60), [&] { return stopping_ || !queue_.empty(); })) {
        lock.unlock();  // an idle minute: finished jobs past their retention go
        auto removed = store_->remove_finished_before(now_seconds() - config_.retention_s);
        if (!removed) log_line(LogLevel::kWarning, "async jobs: " + removed.status().message());
        continue;
      }
      if (stopping_) return;
      id = queue_.front();
      queue_.pop_front();
    }
    run_guarded(
        "async job", [&] { run_one(id); },
        [&](const std::string& what) {
          auto ended = store_->finish(id, JobStatus::kFailed, 500, "", now_seconds());
          log_line(LogLevel::kError, "async job " + id + ": internal error: " + what +
                                         (ended ? "" : " (and " + ended.status().message() + ")"));
        });
  }
}

void AsyncJobs::run_one(const std::string& id) {
  auto job = store_->get(id);
  if (!job || job_finished(job->status)) return;  // cancelled while it waited
  if (Status st = store_->start(id, now_seconds()); !st.is_ok())
    return log_line(LogLevel::kWarning, "async jobs: " + st.message());
  auto run = std::make_shared<JobRun>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_[id] = run;
  }
  const auto [status, body] = run_(*job, key_of_owner(job->owner), *run);
  bool stopping;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_.erase(id);
    stopping = stopping_;
  }
  if (stopping) return;  // cut short by the shutdown: still in progress, run again at the next start
  auto ended =
      store_->finish(id, status == 200 ? JobStatus::kCompleted : JobStatus::kFailed, status, body, now_seconds());
  if (!ended) log_line(LogLevel::kWarning, "async jobs: " + ended.status().message());
}

}  // namespace autoglm
