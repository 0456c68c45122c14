// Asynchronous jobs: a request accepted now (202 and a job id) and run later, at a low
// priority, by a few runner threads that call the synchronous route as a client would and
// store its response. Jobs are rows of the JobStore first, so a restart loses none: those
// found queued or running are run again. Cancelling stops a running job's generation. When the
// store refuses a write (a full or failing disk) nothing is dropped: a finished job's answer
// waits in memory and is written once the store takes writes again (the job is not run again),
// and no job starts meanwhile.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "autoglm/engine.h"
#include "server/jobs/job_store.h"

namespace autoglm {

struct JobsConfig {
  std::string data_dir;            // "" : async jobs off
  int32_t concurrency = 2;         // jobs running at once
  std::string priority = "low";    // the priority class jobs run at (interactive requests come first)
  double retention_s = 7 * 86400;  // finished jobs are deleted this long after they ended
  // Callbacks: the body signed with HMAC-SHA256 under callback_secret (X-AutoGLM-Signature:
  // sha256=HEX; no header without a secret); hosts a callback_url may name (empty: loopback);
  // attempts, the first retry's delay (doubling, with jitter) and each attempt's timeout.
  std::string callback_secret;
  std::vector<std::string> callback_allowlist;
  int32_t callback_attempts = 5;
  double callback_backoff_s = 1;
  double callback_timeout_s = 10;
  // Storage: the database file's cap (0: the disk's; past it new jobs, files and batches are
  // refused with a 503 and nothing stored is lost) and the largest upload to /v1/files.
  int64_t max_bytes = 0;
  int64_t max_file_bytes = int64_t(100) << 20;
};

// A running job's stop switch: the runner arms it with what stops the work; a cancel that
// comes first stops the work as soon as it is armed.
class JobRun {
 public:
  void arm(std::function<void()> stop) {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = std::move(stop);
    if (cancelled_) stop_();
  }
  void cancel() {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_ = true;
    if (stop_) stop_();
  }

 private:
  std::mutex mutex_;
  std::function<void()> stop_;
  bool cancelled_ = false;
};
// What running a job needs from the server: the synchronous route's answer for the job's
// body (the HTTP status and the response body); it arms `run`. kJobInterrupted for the status:
// the server is stopping or draining, so the answer may be cut short; the job stays in
// progress and runs again at the next start.
inline constexpr int kJobInterrupted = -1;
using RunJob = std::function<std::pair<int, std::string>(const Job& job, const std::string& api_key, JobRun& run)>;

// Now, in unix seconds (what jobs and batches record).
double unix_seconds();

// A job as the API shows it (GET /v1/jobs/{id}, and the body of its callback).
nlohmann::ordered_json job_json(const Job& job, const std::optional<CallbackState>& callback);

class AsyncJobs {
 public:
  // Opens data_dir/jobs.db and queues the jobs a previous run left (and their callbacks).
  // `keys`: the configured API keys (a resumed job runs as its owner's key again).
  static Result<std::unique_ptr<AsyncJobs>> start(const JobsConfig& config, std::vector<std::string> keys, RunJob run);
  // Starts the runners and the callback deliverer (once what they call is ready).
  void run();
  ~AsyncJobs() { stop(); }
  // Stops the runners and the deliverer (once); jobs running stay in progress, resumed at the
  // next start. The store stays open.
  void stop();

  // The owner id of an API key (never the key): "" without one.
  static std::string owner_of(const std::string& api_key);

  // The store (batches write their requests into it as jobs, then enqueue them).
  JobStore& store() { return *store_; }
  // Runs jobs already in the store (queued), after those waiting.
  void enqueue(const std::vector<std::string>& ids);
  // Called (on a runner thread) with each job the runners ended; set before submitting.
  void set_on_finished(std::function<void(const Job&)> hook);
  // Ends a batch's queued and running requests as cancelled and stops those running.
  Status cancel_batch(const std::string& batch_id);

  // Errors: a callback_url not allowed (kInvalidArgument, naming it), or the store's.
  Result<Job> submit(const std::string& endpoint, const std::string& body, const std::string& api_key,
                     const std::string& metadata, const std::string& callback_url);
  std::optional<CallbackState> callback(const std::string& id) { return store_->callback(id); }
  std::map<std::string, int64_t> callback_outcomes() { return store_->attempt_outcomes(); }
  // A job of its own (a batch's requests are seen through the batch).
  std::optional<Job> get(const std::string& id, const std::string& api_key);
  Result<std::vector<Job>> list(const std::string& api_key, std::optional<JobStatus> status, const std::string& after,
                                int64_t limit);
  // Cancels a queued or running job; the job as it is now (nullopt: no such job of this key).
  // The store's error when it refused the cancel (the job then goes on).
  Result<std::optional<Job>> cancel(const std::string& id, const std::string& api_key);
  std::map<JobStatus, int64_t> counts() { return store_->counts(); }
  int64_t queue_depth();
  // Finished jobs whose end the store refused so far, waiting to be written.
  int64_t unwritten_ends();

 private:
  // A job's end as the runner had it, until the store takes it.
  struct JobEnd {
    Job job;
    JobStatus status = JobStatus::kFailed;
    int http_status = 0;
    std::string body;
    double at = 0;
  };
  enum class Work { kStop, kIdle, kWriteEnds, kRun };

  AsyncJobs(const JobsConfig& config, std::vector<std::string> keys, RunJob run, std::unique_ptr<JobStore> store);
  void runner();
  Work next_work(std::string& id);
  void run_one(const std::string& id);
  bool write_end(JobEnd end, bool retry);
  void write_unwritten();
  void store_refused(const Status& why);
  void store_took();
  void ended(const Job& job);
  void deliverer();
  void deliver(const std::string& id);
  void callback_due(const std::string& id, double at);
  void callback_later(const std::string& id, const Status& why);
  std::string key_of_owner(const std::string& owner) const;

  JobsConfig config_;
  std::vector<std::string> keys_;
  RunJob run_;
  std::unique_ptr<JobStore> store_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::string> queue_;                           // ids waiting for a runner
  std::map<std::string, std::shared_ptr<JobRun>> running_;  // id -> how to stop it
  bool stopping_ = false;
  std::vector<std::thread> runners_;
  std::multimap<double, std::string> callbacks_due_;  // when -> job id, under mutex_
  std::condition_variable callback_ready_;
  std::thread deliverer_;
  std::function<void(const Job&)> on_finished_;  // under mutex_
  // Ends the store refused, oldest first; while retry_at_ is ahead no runner takes work, and
  // the delay doubles at each refusal (0: the store took the last write). Under mutex_.
  std::deque<JobEnd> unwritten_;
  double retry_at_ = 0, retry_delay_ = 0;
};

}  // namespace autoglm
