#include "server/jobs/async_jobs.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include <xxhash.h>

#include "core/last_resort.h"
#include "core/log.h"
#include "core/random_id.h"
#include "core/thread_priority.h"
#include "server/jobs/callback_client.h"
#include "server/jobs/hmac.h"

namespace autoglm {
namespace {

using json = nlohmann::ordered_json;

// Retries of a refused write: from a quarter second, doubling, up to 5 s (a full disk costs a
// failed write per retry, nothing more).
constexpr double kFirstRetryS = 0.25, kLastRetryS = 5;

}  // namespace

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

json job_json(const Job& job, const std::optional<CallbackState>& callback) {
  json j = {{"id", job.id},
            {"object", "job"},
            {"endpoint", job.endpoint},
            {"status", job_status_name(job.status)},
            {"created_at", int64_t(job.created_at)},
            {"started_at", job.started_at > 0 ? json(int64_t(job.started_at)) : json(nullptr)},
            {"finished_at", job.finished_at > 0 ? json(int64_t(job.finished_at)) : json(nullptr)},
            {"attempts", job.attempts},
            {"status_url", "/v1/jobs/" + job.id},
            {"metadata", job.metadata.empty() ? json(nullptr) : json::parse(job.metadata, nullptr, false)}};
  if (job.status == JobStatus::kCompleted || job.status == JobStatus::kFailed) {
    j["http_status"] = job.http_status;
    json body = json::parse(job.result, nullptr, false);
    if (body.is_discarded()) body = job.result;
    j[job.status == JobStatus::kCompleted ? "result" : "error"] =
        job.status == JobStatus::kFailed && body.is_object() && body.contains("error") ? body["error"] : body;
  }
  if (!job.callback_url.empty()) {
    json attempts = json::array();
    if (callback)
      for (const CallbackAttempt& a : callback->history)
        attempts.push_back({{"attempt", a.attempt},
                            {"at", a.at},
                            {"http_status", a.http_status == 0 ? json(nullptr) : json(a.http_status)},
                            {"error", a.error.empty() ? json(nullptr) : json(a.error)}});
    j["callback"] = {{"url", job.callback_url},
                     {"state", callback ? callback_status_name(callback->state) : "waiting"},
                     {"attempts", attempts}};
  }
  return j;
}

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
  AUTOGLM_ASSIGN_OR_RETURN(auto store, JobStore::open(config.data_dir + "/jobs.db", config.max_bytes));
  AUTOGLM_ASSIGN_OR_RETURN(const std::vector<Job> left, store->unfinished());
  std::unique_ptr<AsyncJobs> jobs(new AsyncJobs(config, std::move(keys), std::move(run), std::move(store)));
  for (const Job& j : left) jobs->queue_.push_back(j.id);  // oldest first, as they came
  AUTOGLM_RETURN_IF_ERROR(jobs->store_->schedule_callbacks(unix_seconds()));
  AUTOGLM_ASSIGN_OR_RETURN(const auto pending, jobs->store_->pending_callbacks());
  for (const auto& [id, at] : pending) jobs->callbacks_due_.emplace(at, id);
  if (!left.empty())
    log_line(LogLevel::kInfo, "async jobs: resuming " + std::to_string(left.size()) + " unfinished job(s)");
  return jobs;
}

void AsyncJobs::run() {
  if (deliverer_.joinable()) return;
  for (int i = 0; i < std::max(1, config_.concurrency); ++i) runners_.emplace_back([this] { runner(); });
  deliverer_ = std::thread([this] { deliverer(); });
}

AsyncJobs::AsyncJobs(const JobsConfig& config, std::vector<std::string> keys, RunJob run,
                     std::unique_ptr<JobStore> store)
    : config_(config), keys_(std::move(keys)), run_(std::move(run)), store_(std::move(store)) {}

void AsyncJobs::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, run] : running_) run->cancel();
  }
  ready_.notify_all();
  callback_ready_.notify_all();
  for (auto& t : runners_) t.join();
  if (deliverer_.joinable()) deliverer_.join();
  write_unwritten();  // a last try; what stays unwritten is in progress in the store
  if (const int64_t left = unwritten_ends(); left > 0)
    log_line(LogLevel::kWarning, "async jobs: " + std::to_string(left) +
                                     " finished job(s) could not be written to the store; they run again at the "
                                     "next start");
}

std::string AsyncJobs::key_of_owner(const std::string& owner) const {
  for (const std::string& key : keys_)
    if (owner_of(key) == owner) return key;
  return "";
}

Result<Job> AsyncJobs::submit(const std::string& endpoint, const std::string& body, const std::string& api_key,
                              const std::string& metadata, const std::string& callback_url) {
  if (!callback_url.empty()) {
    AUTOGLM_RETURN_IF_ERROR(parse_callback_url(callback_url, config_.callback_allowlist).status());
  }
  Job job;
  job.callback_url = callback_url;
  job.id = random_id("job_");
  job.endpoint = endpoint;
  job.body = body;
  job.owner = owner_of(api_key);
  job.metadata = metadata;
  job.created_at = unix_seconds();
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
  if (!job || job->owner != owner_of(api_key) || !job->batch_id.empty()) return std::nullopt;
  return job;
}

void AsyncJobs::enqueue(const std::vector<std::string>& ids) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.insert(queue_.end(), ids.begin(), ids.end());
  }
  ready_.notify_all();
}

void AsyncJobs::set_on_finished(std::function<void(const Job&)> hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_finished_ = std::move(hook);
}

Status AsyncJobs::cancel_batch(const std::string& batch_id) {
  AUTOGLM_ASSIGN_OR_RETURN(const auto running, store_->cancel_batch(batch_id, unix_seconds()));
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::string& id : running)
    if (auto it = running_.find(id); it != running_.end()) it->second->cancel();
  return Status::ok();
}

Result<std::vector<Job>> AsyncJobs::list(const std::string& api_key, std::optional<JobStatus> status,
                                         const std::string& after, int64_t limit) {
  return store_->list(owner_of(api_key), status, after, limit);
}

Result<std::optional<Job>> AsyncJobs::cancel(const std::string& id, const std::string& api_key) {
  auto job = get(id, api_key);
  if (!job) return std::optional<Job>();
  if (!job_finished(job->status)) {
    auto ended = store_->finish(id, JobStatus::kCancelled, 499, "", unix_seconds());
    if (!ended) return ended.status();  // not cancelled: the job goes on
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = running_.find(id); it != running_.end()) it->second->cancel();
    }
    if (*ended && !job->callback_url.empty()) callback_due(id, unix_seconds());
  }
  return store_->get(id);
}

int64_t AsyncJobs::queue_depth() {
  std::lock_guard<std::mutex> lock(mutex_);
  return int64_t(queue_.size());
}

void AsyncJobs::runner() {
  use_background_priority();  // preparing a job's request and its reply must not take the engine's cores
  for (;;) {
    std::string id;
    switch (next_work(id)) {
      case Work::kStop: return;
      case Work::kIdle: {  // an idle minute: finished jobs past their retention go
        auto removed = store_->remove_finished_before(unix_seconds() - config_.retention_s);
        if (!removed) log_line(LogLevel::kWarning, "async jobs: " + removed.status().message());
        continue;
      }
      case Work::kWriteEnds: write_unwritten(); continue;
      case Work::kRun: break;
    }
    run_guarded(
        "async job", [&] { run_one(id); },
        [&](const std::string& what) {
          log_line(LogLevel::kError, "async job " + id + ": internal error: " + what);
          if (auto job = store_->get(id)) write_end({*job, JobStatus::kFailed, 500, "", unix_seconds()}, false);
        });
  }
}

// Waits for a runner's next work: the refused ends first, once their retry is due (one runner
// writes them, the others wait), then the queue; no job starts while writes are refused.
AsyncJobs::Work AsyncJobs::next_work(std::string& id) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (stopping_) return Work::kStop;
    const double now = unix_seconds();
    if (retry_at_ > now) {
      ready_.wait_for(lock, std::chrono::duration<double>(retry_at_ - now));
      continue;
    }
    if (!unwritten_.empty()) {
      retry_at_ = now + std::max(retry_delay_, kFirstRetryS);
      return Work::kWriteEnds;
    }
    if (!queue_.empty()) {
      id = queue_.front();
      queue_.pop_front();
      return Work::kRun;
    }
    if (!ready_.wait_for(lock, std::chrono::seconds(60),
                         [&] { return stopping_ || !queue_.empty() || !unwritten_.empty(); }))
      return Work::kIdle;
  }
}

void AsyncJobs::run_one(const std::string& id) {
  auto job = store_->get(id);
  if (!job || job_finished(job->status)) return;  // cancelled while it waited
  if (Status st = store_->start(id, unix_seconds()); !st.is_ok()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_front(id);  // still queued in the store: it runs once the store takes writes
    }
    return store_refused(st);
  }
  store_took();
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
  if (stopping || status == kJobInterrupted) return;  // still in progress: run again at the next start
  write_end({*job, status == 200 ? JobStatus::kCompleted : JobStatus::kFailed, status, body, unix_seconds()}, false);
}

// Writes a job's end; false when the store refused it: the end then waits in unwritten_ (first
// when it was `retry`ing, so the order stays) and the runners back off.
bool AsyncJobs::write_end(JobEnd end, bool retry) {
  auto finished = store_->finish(end.job.id, end.status, end.http_status, end.body, end.at);
  if (!finished) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      retry ? unwritten_.push_front(std::move(end)) : unwritten_.push_back(std::move(end));
    }
    store_refused(finished.status());
    return false;
  }
  store_took();
  if (*finished) ended(end.job);  // false: it was cancelled meanwhile, and stays so
  return true;
}

void AsyncJobs::write_unwritten() {
  for (;;) {
    JobEnd end;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (unwritten_.empty()) break;
      end = std::move(unwritten_.front());
      unwritten_.pop_front();
    }
    if (!write_end(std::move(end), true)) return;
  }
  store_took();
}

void AsyncJobs::store_refused(const Status& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (retry_delay_ == 0)
    log_line(LogLevel::kWarning, "async jobs: the store refused a write (" + why.message() +
                                     "): no job starts, and finished ones are kept until it takes them");
  retry_delay_ = retry_delay_ == 0 ? kFirstRetryS : std::min(2 * retry_delay_, kLastRetryS);
  retry_at_ = unix_seconds() + retry_delay_;
}

void AsyncJobs::store_took() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (retry_delay_ == 0 && retry_at_ == 0) return;
    if (retry_delay_ > 0) log_line(LogLevel::kInfo, "async jobs: the store takes writes again");
    retry_delay_ = retry_at_ = 0;
  }
  ready_.notify_all();
}

int64_t AsyncJobs::unwritten_ends() {
  std::lock_guard<std::mutex> lock(mutex_);
  return int64_t(unwritten_.size());
}

// After a runner ended a job: its callback is due, and whoever waits on it is told.
void AsyncJobs::ended(const Job& job) {
  if (!job.callback_url.empty()) callback_due(job.id, unix_seconds());
  std::function<void(const Job&)> hook;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    hook = on_finished_;
  }
  if (hook) hook(job);
}

// Records that a finished job's callback is due (durably first).
void AsyncJobs::callback_due(const std::string& id, double at) {
  if (Status st = store_->schedule_callbacks(at); !st.is_ok())
    log_line(LogLevel::kWarning, "async jobs: " + st.message());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    callbacks_due_.emplace(at, id);
  }
  callback_ready_.notify_one();
}

// A callback the store could not schedule or record: tried again in a few seconds.
void AsyncJobs::callback_later(const std::string& id, const Status& why) {
  log_line(LogLevel::kWarning, "async jobs: callback of " + id + ": " + why.message() + "; tried again later");
  std::lock_guard<std::mutex> lock(mutex_);
  callbacks_due_.emplace(unix_seconds() + kLastRetryS, id);
}

void AsyncJobs::deliverer() {
  use_background_priority();
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (callbacks_due_.empty()) {
      callback_ready_.wait(lock);
      continue;
    }
    const double wait = callbacks_due_.begin()->first - unix_seconds();
    if (wait > 0) {
      callback_ready_.wait_for(lock, std::chrono::duration<double>(std::min(wait, 60.0)));
      continue;
    }
    const std::string id = callbacks_due_.begin()->second;
    callbacks_due_.erase(callbacks_due_.begin());
    lock.unlock();
    run_guarded(
        "callback", [&] { deliver(id); },
        [&](const std::string& what) { log_line(LogLevel::kError, "callback of " + id + ": " + what); });
    lock.lock();
  }
}

// One attempt; the next is due after the backoff (doubling from callback_backoff_s, times a
// jitter in [0.5, 1)) until the attempts are used up. The body and the job id are the same at
// every attempt, so a receiver can drop duplicates.
void AsyncJobs::deliver(const std::string& id) {
  const auto job = store_->get(id);
  auto state = store_->callback(id);
  if (job && !state && job_finished(job->status) && !job->callback_url.empty()) {
    // The store refused to schedule it when the job ended: now, or again later.
    if (Status st = store_->schedule_callbacks(unix_seconds()); !st.is_ok()) return callback_later(id, st);
    state = store_->callback(id);
  }
  if (!job || !state || state->state != CallbackStatus::kPending) return;
  const std::string body = job_json(*job, std::nullopt).dump(-1, ' ', false, json::error_handler_t::replace);
  std::vector<std::pair<std::string, std::string>> headers = {
      {"X-AutoGLM-Job", id}, {"X-AutoGLM-Attempt", std::to_string(state->attempts + 1)}};
  if (!config_.callback_secret.empty())
    headers.emplace_back("X-AutoGLM-Signature", "sha256=" + hmac_sha256_hex(config_.callback_secret, body));
  CallbackOutcome outcome;
  auto url = parse_callback_url(job->callback_url, config_.callback_allowlist);
  if (url)
    outcome = post_callback(*url, body, headers, config_.callback_timeout_s);
  else
    outcome.error = url.status().message();  // the allowlist changed since the job was accepted
  CallbackAttempt attempt{state->attempts + 1, unix_seconds(), outcome.http_status, outcome.error};
  const bool last = attempt.attempt >= config_.callback_attempts;
  const CallbackStatus next_state = outcome.delivered() ? CallbackStatus::kDelivered
                                    : last              ? CallbackStatus::kFailed
                                                        : CallbackStatus::kPending;
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const double jitter = std::uniform_real_distribution<double>(0.5, 1.0)(rng);
  const double next_at = attempt.at + config_.callback_backoff_s * std::pow(2.0, attempt.attempt - 1) * jitter;
  if (Status st = store_->record_attempt(id, attempt, next_state, next_at); !st.is_ok()) {
    // Unrecorded, the callback is still pending in the store: a failed attempt is made again
    // (a delivered one is sent again only after a restart, a duplicate the receiver can drop).
    if (!outcome.delivered()) callback_later(id, st);
    return;
  }
  if (next_state != CallbackStatus::kPending) return;
  std::lock_guard<std::mutex> lock(mutex_);
  callbacks_due_.emplace(next_at, id);
}

}  // namespace autoglm
