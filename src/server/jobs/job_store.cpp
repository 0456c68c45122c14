#include "server/jobs/job_store.h"

namespace autoglm {
namespace {

constexpr const char* kNames[kJobStatusCount] = {"queued", "in_progress", "completed", "failed", "cancelled"};
constexpr const char* kColumns =
    "id, endpoint, body, owner, callback_url, metadata, status, created_at, started_at, finished_at, http_status, "
    "result, attempts, batch_id, custom_id";

Job job_of(const SqlRow& r) {
  Job j;
  j.id = sql_text(r[0]);
  j.endpoint = sql_text(r[1]);
  j.body = sql_text(r[2]);
  j.owner = sql_text(r[3]);
  j.callback_url = sql_text(r[4]);
  j.metadata = sql_text(r[5]);
  j.status = job_status_from_name(sql_text(r[6])).value_or(JobStatus::kFailed);
  j.created_at = sql_number(r[7]);
  j.started_at = sql_number(r[8]);
  j.finished_at = sql_number(r[9]);
  j.http_status = int(sql_number(r[10]));
  j.result = sql_text(r[11]);
  j.attempts = int32_t(sql_number(r[12]));
  j.batch_id = sql_text(r[13]);
  j.custom_id = sql_text(r[14]);
  return j;
}

Result<std::vector<Job>> jobs_of(Result<std::vector<SqlRow>> rows) {
  return rows_as<Job>(std::move(rows), job_of);
}

}  // namespace

const char* job_status_name(JobStatus s) {
  return kNames[int(s)];
}

std::optional<JobStatus> job_status_from_name(const std::string& name) {
  for (int i = 0; i < kJobStatusCount; ++i)
    if (name == kNames[i]) return JobStatus(i);
  return std::nullopt;
}

namespace {
constexpr const char* kCallbackNames[] = {"pending", "delivered", "failed"};
}  // namespace

const char* callback_status_name(CallbackStatus s) {
  return kCallbackNames[int(s)];
}

std::optional<CallbackStatus> callback_status_from_name(const std::string& name) {
  for (int i = 0; i < 3; ++i)
    if (name == kCallbackNames[i]) return CallbackStatus(i);
  return std::nullopt;
}

bool job_finished(JobStatus s) {
  return s == JobStatus::kCompleted || s == JobStatus::kFailed || s == JobStatus::kCancelled;
}

Result<std::unique_ptr<JobStore>> JobStore::open(const std::string& path, int64_t max_bytes) {
  AUTOGLM_ASSIGN_OR_RETURN(
      auto db, SqliteDb::open(
                   path,
                   "CREATE TABLE IF NOT EXISTS jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE "
                   "NOT NULL, endpoint TEXT NOT NULL, body TEXT NOT NULL, owner TEXT NOT NULL, callback_url "
                   "TEXT NOT NULL, metadata TEXT NOT NULL, status TEXT NOT NULL, created_at REAL NOT NULL, "
                   "started_at REAL NOT NULL, finished_at REAL NOT NULL, http_status INTEGER NOT NULL, "
                   "result TEXT NOT NULL, attempts INTEGER NOT NULL, batch_id TEXT NOT NULL, custom_id TEXT NOT NULL);"
                   "CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs (status, seq);"
                   "CREATE INDEX IF NOT EXISTS jobs_by_batch ON jobs (batch_id, seq);"
                   "CREATE TABLE IF NOT EXISTS callbacks (job_id TEXT PRIMARY KEY, state TEXT NOT NULL, "
                   "attempts INTEGER NOT NULL, next_at REAL NOT NULL);"
                   "CREATE TABLE IF NOT EXISTS callback_attempts (job_id TEXT NOT NULL, attempt INTEGER NOT "
                   "NULL, at REAL NOT NULL, http_status INTEGER NOT NULL, error TEXT NOT NULL);",
                   "jobs.data_dir", max_bytes));
  return std::unique_ptr<JobStore>(new JobStore(std::move(db)));
}

Status JobStore::add(const Job& j) {
  return db_->exec(
      std::string("INSERT INTO jobs (") + kColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      {j.id, j.endpoint, j.body, j.owner, j.callback_url, j.metadata, std::string(job_status_name(j.status)),
       j.created_at, j.started_at, j.finished_at, int64_t(j.http_status), j.result, int64_t(j.attempts), j.batch_id,
       j.custom_id});
}

std::optional<Job> JobStore::get(const std::string& id) {
  auto rows = jobs_of(db_->query(std::string("SELECT ") + kColumns + " FROM jobs WHERE id = ?", {id}));
  if (!rows || rows->empty()) return std::nullopt;
  return rows->front();
}

Result<std::vector<Job>> JobStore::list(const std::string& owner, std::optional<JobStatus> status,
                                        const std::string& after, int64_t limit) {
  std::string sql = std::string("SELECT ") + kColumns + " FROM jobs WHERE owner = ? AND batch_id = ''";
  std::vector<SqlValue> params = {owner};
  if (status) {
    sql += " AND status = ?";
    params.emplace_back(std::string(job_status_name(*status)));
  }
  if (!after.empty()) {
    sql += " AND seq < (SELECT seq FROM jobs WHERE id = ?)";
    params.emplace_back(after);
  }
  sql += " ORDER BY seq DESC LIMIT ?";
  params.emplace_back(limit);
  return jobs_of(db_->query(sql, params));
}

Status JobStore::start(const std::string& id, double now) {
  return db_->exec(
      "UPDATE jobs SET status = 'in_progress', started_at = ?, attempts = attempts + 1 WHERE id = ? AND "
      "status IN ('queued', 'in_progress')",
      {now, id});
}

Result<bool> JobStore::finish(const std::string& id, JobStatus status, int http_status, const std::string& result,
                              double now) {
  AUTOGLM_ASSIGN_OR_RETURN(
      auto rows, db_->query("UPDATE jobs SET status = ?, http_status = ?, result = ?, finished_at = ? WHERE id = ? AND "
                            "status IN ('queued', 'in_progress') RETURNING id",
                            {std::string(job_status_name(status)), int64_t(http_status), result, now, id}));
  return !rows.empty();
}

Result<std::vector<Job>> JobStore::unfinished() {
  return jobs_of(db_->query(std::string("SELECT ") + kColumns +
                            " FROM jobs WHERE status IN ('queued', 'in_progress') ORDER BY seq"));
}

Result<int64_t> JobStore::remove_finished_before(double before) {
  // A job goes with its callback, unless that is still to be delivered.
  AUTOGLM_ASSIGN_OR_RETURN(
      auto rows,
      db_->query("DELETE FROM jobs WHERE status IN ('completed', 'failed', 'cancelled') AND finished_at < ? "
                 "AND batch_id = '' AND id NOT IN (SELECT job_id FROM callbacks WHERE state = 'pending') RETURNING id",
                 {before}));
  AUTOGLM_RETURN_IF_ERROR(db_->exec("DELETE FROM callbacks WHERE job_id NOT IN (SELECT id FROM jobs)"));
  AUTOGLM_RETURN_IF_ERROR(db_->exec("DELETE FROM callback_attempts WHERE job_id NOT IN (SELECT id FROM jobs)"));
  return int64_t(rows.size());
}

Status JobStore::schedule_callbacks(double now) {
  return db_->exec(
      "INSERT OR IGNORE INTO callbacks (job_id, state, attempts, next_at) SELECT id, 'pending', 0, ? FROM jobs WHERE "
      "callback_url != '' AND status IN ('completed', 'failed', 'cancelled')",
      {now});
}

Result<std::vector<std::pair<std::string, double>>> JobStore::pending_callbacks() {
  AUTOGLM_ASSIGN_OR_RETURN(
      auto rows, db_->query("SELECT job_id, next_at FROM callbacks WHERE state = 'pending' ORDER BY next_at"));
  std::vector<std::pair<std::string, double>> out;
  for (const SqlRow& r : rows) out.emplace_back(sql_text(r[0]), sql_number(r[1]));
  return out;
}

std::optional<CallbackState> JobStore::callback(const std::string& job_id) {
  auto rows = db_->query("SELECT state, attempts, next_at FROM callbacks WHERE job_id = ?", {job_id});
  if (!rows || rows->empty()) return std::nullopt;
  CallbackState c;
  // A state this build does not know is not retried.
  c.state = callback_status_from_name(sql_text((*rows)[0][0])).value_or(CallbackStatus::kFailed);
  c.attempts = int32_t(sql_number((*rows)[0][1]));
  c.next_at = sql_number((*rows)[0][2]);
  auto history = db_->query(
      "SELECT attempt, at, http_status, error FROM callback_attempts WHERE job_id = ? ORDER BY attempt", {job_id});
  if (history)
    for (const SqlRow& r : *history)
      c.history.push_back({int32_t(sql_number(r[0])), sql_number(r[1]), int(sql_number(r[2])), sql_text(r[3])});
  return c;
}

Status JobStore::record_attempt(const std::string& job_id, const CallbackAttempt& a, CallbackStatus state,
                                double next_at) {
  AUTOGLM_RETURN_IF_ERROR(
      db_->exec("INSERT INTO callback_attempts (job_id, attempt, at, http_status, error) VALUES (?, ?, ?, ?, ?)",
                {job_id, int64_t(a.attempt), a.at, int64_t(a.http_status), a.error}));
  return db_->exec("UPDATE callbacks SET state = ?, attempts = ?, next_at = ? WHERE job_id = ?",
                   {std::string(callback_status_name(state)), int64_t(a.attempt), next_at, job_id});
}

std::map<std::string, int64_t> JobStore::attempt_outcomes() {
  std::map<std::string, int64_t> out;
  auto rows = db_->query(
      "SELECT CASE WHEN error = '' THEN 'delivered' ELSE 'failed' END, COUNT(*) FROM callback_attempts GROUP BY 1");
  if (rows)
    for (const SqlRow& r : *rows) out[sql_text(r[0])] = int64_t(sql_number(r[1]));
  return out;
}

std::map<JobStatus, int64_t> JobStore::counts() {
  return counts_where("batch_id = ''", {});
}

std::map<JobStatus, int64_t> JobStore::batch_counts(const std::string& batch_id) {
  if (batch_id.empty()) return counts_where("batch_id != ''", {});
  return counts_where("batch_id = ?", {batch_id});
}

std::map<JobStatus, int64_t> JobStore::counts_where(const std::string& where, const std::vector<SqlValue>& params) {
  std::map<JobStatus, int64_t> out;
  auto rows = db_->query("SELECT status, COUNT(*) FROM jobs WHERE " + where + " GROUP BY status", params);
  if (!rows) return out;
  for (const SqlRow& r : *rows)
    if (auto s = job_status_from_name(sql_text(r[0]))) out[*s] = int64_t(sql_number(r[1]));
  return out;
}

Result<std::vector<Job>> JobStore::batch_jobs(const std::string& batch_id) {
  return jobs_of(
      db_->query(std::string("SELECT ") + kColumns + " FROM jobs WHERE batch_id = ? ORDER BY seq", {batch_id}));
}

Result<std::vector<std::string>> JobStore::cancel_batch(const std::string& batch_id, double now) {
  AUTOGLM_ASSIGN_OR_RETURN(
      auto rows,
      db_->query("UPDATE jobs SET status = 'cancelled', http_status = 499, finished_at = ? WHERE batch_id = ? AND "
                 "status IN ('queued', 'in_progress') RETURNING id, started_at",
                 {now, batch_id}));
  std::vector<std::string> running;
  for (const SqlRow& r : rows)
    if (sql_number(r[1]) > 0) running.push_back(sql_text(r[0]));
  return running;
}

Status JobStore::remove_batch(const std::string& batch_id) {
  return db_->exec("DELETE FROM jobs WHERE batch_id = ?", {batch_id});
}

}  // namespace autoglm
