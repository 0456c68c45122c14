#include "server/job_store.h"

namespace autoglm {
namespace {

constexpr const char* kNames[kJobStatusCount] = {"queued", "in_progress", "completed", "failed", "cancelled"};
constexpr const char* kColumns =
    "id, endpoint, body, owner, callback_url, metadata, status, created_at, started_at, finished_at, http_status, "
    "result, attempts";

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
  return j;
}

Result<std::vector<Job>> jobs_of(Result<std::vector<SqlRow>> rows) {
  if (!rows) return rows.status();
  std::vector<Job> jobs;
  for (const SqlRow& r : *rows) jobs.push_back(job_of(r));
  return jobs;
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

bool job_finished(JobStatus s) {
  return s == JobStatus::kCompleted || s == JobStatus::kFailed || s == JobStatus::kCancelled;
}

Result<std::unique_ptr<JobStore>> JobStore::open(const std::string& path) {
  AUTOGLM_ASSIGN_OR_RETURN(
      auto db, SqliteDb::open(path,
                              "CREATE TABLE IF NOT EXISTS jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE "
                              "NOT NULL, endpoint TEXT NOT NULL, body TEXT NOT NULL, owner TEXT NOT NULL, callback_url "
                              "TEXT NOT NULL, metadata TEXT NOT NULL, status TEXT NOT NULL, created_at REAL NOT NULL, "
                              "started_at REAL NOT NULL, finished_at REAL NOT NULL, http_status INTEGER NOT NULL, "
                              "result TEXT NOT NULL, attempts INTEGER NOT NULL);"
                              "CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs (status, seq);",
                              "jobs.data_dir"));
  return std::unique_ptr<JobStore>(new JobStore(std::move(db)));
}

Status JobStore::add(const Job& j) {
  return db_->exec(
      std::string("INSERT INTO jobs (") + kColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      {j.id, j.endpoint, j.body, j.owner, j.callback_url, j.metadata, std::string(job_status_name(j.status)),
       j.created_at, j.started_at, j.finished_at, int64_t(j.http_status), j.result, int64_t(j.attempts)});
}

std::optional<Job> JobStore::get(const std::string& id) {
  auto rows = jobs_of(db_->query(std::string("SELECT ") + kColumns + " FROM jobs WHERE id = ?", {id}));
  if (!rows || rows->empty()) return std::nullopt;
  return rows->front();
}

Result<std::vector<Job>> JobStore::list(const std::string& owner, std::optional<JobStatus> status,
                                        const std::string& after, int64_t limit) {
  std::string sql = std::string("SELECT ") + kColumns + " FROM jobs WHERE owner = ?";
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
  AUTOGLM_ASSIGN_OR_RETURN(
      auto rows, db_->query("DELETE FROM jobs WHERE status IN ('completed', 'failed', 'cancelled') AND finished_at < ? "
                            "RETURNING id",
                            {before}));
  return int64_t(rows.size());
}

std::map<JobStatus, int64_t> JobStore::counts() {
  std::map<JobStatus, int64_t> out;
  auto rows = db_->query("SELECT status, COUNT(*) FROM jobs GROUP BY status");
  if (!rows) return out;
  for (const SqlRow& r : *rows)
    if (auto s = job_status_from_name(sql_text(r[0]))) out[*s] = int64_t(sql_number(r[1]));
  return out;
}

}  // namespace autoglm
