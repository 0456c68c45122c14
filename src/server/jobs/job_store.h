// Asynchronous jobs as rows of a SQLite file (jobs.data_dir/jobs.db): accepted jobs are
// written before the client hears 202, so a restart (or a crash) loses none; jobs found
// queued or running at start-up are run again. Status moves queued -> in_progress ->
// completed | failed | cancelled; a finished job keeps its result until retention removes it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "server/store/sqlite_db.h"

namespace autoglm {

enum class JobStatus { kQueued, kInProgress, kCompleted, kFailed, kCancelled };
inline constexpr int kJobStatusCount = 5;

const char* job_status_name(JobStatus s);  // "queued", "in_progress", ...
std::optional<JobStatus> job_status_from_name(const std::string& name);
bool job_finished(JobStatus s);

struct Job {
  std::string id;        // "job_..."
  std::string endpoint;  // the synchronous route it runs: /v1/chat/completions, /v1/completions, /v1/tasks
  std::string body;      // the request body, as sent
  std::string owner;     // the API key's id ("" without keys): only its owner sees a job
  std::string callback_url;
  std::string metadata;  // JSON object text ("" for none)
  JobStatus status = JobStatus::kQueued;
  double created_at = 0, started_at = 0, finished_at = 0;  // unix seconds (0: not yet)
  int http_status = 0;                                     // of the finished request
  std::string result;                                      // the response body (JSON text) of a completed or failed job
  int32_t attempts = 0;                                    // times it was started (more than 1 after a restart)
  std::string batch_id;   // a request of this batch ("" : a job of its own, the only kind /v1/jobs shows)
  std::string custom_id;  // the batch line's
};

// A finished job's callback: pending (an attempt is due at next_at), delivered or failed
// (attempts used up); every attempt is kept.
struct CallbackAttempt {
  int32_t attempt = 0;
  double at = 0;
  int http_status = 0;  // 0: no response
  std::string error;    // "" : delivered
};

// Where a finished job's callback stands: an attempt due, delivered, or its attempts used up.
enum class CallbackStatus { kPending, kDelivered, kFailed };
const char* callback_status_name(CallbackStatus s);  // "pending", "delivered", "failed"
std::optional<CallbackStatus> callback_status_from_name(const std::string& name);

struct CallbackState {
  CallbackStatus state = CallbackStatus::kPending;
  int32_t attempts = 0;
  double next_at = 0;
  std::vector<CallbackAttempt> history;
};

class JobStore {
 public:
  // Errors name jobs.data_dir and the file.
  // `max_bytes` (0: none) caps the file (see SqliteDb::open).
  static Result<std::unique_ptr<JobStore>> open(const std::string& path, int64_t max_bytes = 0);
  // The database, for the stores that live beside the jobs (files, batches).
  SqliteDb& db() { return *db_; }

  Status add(const Job& job);
  std::optional<Job> get(const std::string& id);
  // Jobs of their own (not a batch's), newest first; `after`: the id the previous page ended
  // with; `status`: only those.
  Result<std::vector<Job>> list(const std::string& owner, std::optional<JobStatus> status, const std::string& after,
                                int64_t limit);
  Status start(const std::string& id, double now);
  // Sets the end state unless the job already ended (a cancelled job stays cancelled): false then.
  Result<bool> finish(const std::string& id, JobStatus status, int http_status, const std::string& result, double now);
  // Queued or in progress, oldest first: what start-up runs again.
  Result<std::vector<Job>> unfinished();
  // Finished jobs that ended before `before` are deleted; how many.
  Result<int64_t> remove_finished_before(double before);
  // Jobs of their own by status / a batch's requests by status ("" : of all batches).
  std::map<JobStatus, int64_t> counts();
  std::map<JobStatus, int64_t> batch_counts(const std::string& batch_id);
  // A batch's requests, in the order of its lines.
  Result<std::vector<Job>> batch_jobs(const std::string& batch_id);
  // Ends a batch's queued and running requests as cancelled; the ids that were running.
  Result<std::vector<std::string>> cancel_batch(const std::string& batch_id, double now);
  Status remove_batch(const std::string& batch_id);

  // Callbacks. A finished job with a callback_url that has none yet gets one due now (this
  // also repairs a stop between a job's end and its callback's scheduling).
  Status schedule_callbacks(double now);
  // The callbacks still to deliver: job id and when.
  Result<std::vector<std::pair<std::string, double>>> pending_callbacks();
  std::optional<CallbackState> callback(const std::string& job_id);
  Status record_attempt(const std::string& job_id, const CallbackAttempt& attempt, CallbackStatus state,
                        double next_at);
  std::map<std::string, int64_t> attempt_outcomes();  // delivered / failed attempts

 private:
  explicit JobStore(std::unique_ptr<SqliteDb> db) : db_(std::move(db)) {}
  std::map<JobStatus, int64_t> counts_where(const std::string& where, const std::vector<SqlValue>& params);
  std::unique_ptr<SqliteDb> db_;
};

}  // namespace autoglm
