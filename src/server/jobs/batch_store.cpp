#include "server/jobs/batch_store.h"

namespace autoglm {
namespace {

constexpr const char* kNames[kBatchStatusCount] = {"validating", "failed",  "in_progress", "finalizing",
                                                   "completed",  "expired", "cancelling",  "cancelled"};
constexpr const char* kColumns =
    "id, owner, endpoint, input_file_id, completion_window, metadata, status, created_at, in_progress_at, expires_at, "
    "finalizing_at, completed_at, failed_at, expired_at, cancelling_at, cancelled_at, output_file_id, error_file_id, "
    "total, completed, failed";

std::optional<BatchStatus> status_of(const std::string& name) {
  for (int i = 0; i < kBatchStatusCount; ++i)
    if (name == kNames[i]) return BatchStatus(i);
  return std::nullopt;
}

StoredBatch batch_of(const SqlRow& r) {
  StoredBatch b;
  b.id = sql_text(r[0]);
  b.owner = sql_text(r[1]);
  b.endpoint = sql_text(r[2]);
  b.input_file_id = sql_text(r[3]);
  b.completion_window = sql_text(r[4]);
  b.metadata = sql_text(r[5]);
  b.status = status_of(sql_text(r[6])).value_or(BatchStatus::kFailed);
  double* times[] = {&b.created_at, &b.in_progress_at, &b.expires_at,    &b.finalizing_at, &b.completed_at,
                     &b.failed_at,  &b.expired_at,     &b.cancelling_at, &b.cancelled_at};
  for (int i = 0; i < 9; ++i) *times[i] = sql_number(r[7 + i]);
  b.output_file_id = sql_text(r[16]);
  b.error_file_id = sql_text(r[17]);
  b.total = int64_t(sql_number(r[18]));
  b.completed = int64_t(sql_number(r[19]));
  b.failed = int64_t(sql_number(r[20]));
  return b;
}

Result<std::vector<StoredBatch>> batches_of(Result<std::vector<SqlRow>> rows) {
  return rows_as<StoredBatch>(std::move(rows), batch_of);
}

}  // namespace

const char* batch_status_name(BatchStatus s) {
  return kNames[int(s)];
}

bool batch_final(BatchStatus s) {
  return s == BatchStatus::kFailed || s == BatchStatus::kCompleted || s == BatchStatus::kExpired ||
         s == BatchStatus::kCancelled;
}

Result<std::unique_ptr<BatchStore>> BatchStore::open(SqliteDb& db) {
  AUTOGLM_RETURN_IF_ERROR(db.apply_schema(
      "CREATE TABLE IF NOT EXISTS batches (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, "
      "owner TEXT NOT NULL, endpoint TEXT NOT NULL, input_file_id TEXT NOT NULL, completion_window TEXT NOT "
      "NULL, metadata TEXT NOT NULL, status TEXT NOT NULL, created_at REAL NOT NULL, in_progress_at REAL NOT "
      "NULL, expires_at REAL NOT NULL, finalizing_at REAL NOT NULL, completed_at REAL NOT NULL, failed_at "
      "REAL NOT NULL, expired_at REAL NOT NULL, cancelling_at REAL NOT NULL, cancelled_at REAL NOT NULL, "
      "output_file_id TEXT NOT NULL, error_file_id TEXT NOT NULL, total INTEGER NOT NULL, completed INTEGER "
      "NOT NULL, failed INTEGER NOT NULL)"));
  return std::unique_ptr<BatchStore>(new BatchStore(db));
}

Status BatchStore::add(const StoredBatch& b) {
  return db_.exec(std::string("INSERT INTO batches (") + kColumns +
                      ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                  {b.id,
                   b.owner,
                   b.endpoint,
                   b.input_file_id,
                   b.completion_window,
                   b.metadata,
                   std::string(batch_status_name(b.status)),
                   b.created_at,
                   b.in_progress_at,
                   b.expires_at,
                   b.finalizing_at,
                   b.completed_at,
                   b.failed_at,
                   b.expired_at,
                   b.cancelling_at,
                   b.cancelled_at,
                   b.output_file_id,
                   b.error_file_id,
                   b.total,
                   b.completed,
                   b.failed});
}

std::optional<StoredBatch> BatchStore::get(const std::string& id) {
  auto rows = batches_of(db_.query(std::string("SELECT ") + kColumns + " FROM batches WHERE id = ?", {id}));
  if (!rows || rows->empty()) return std::nullopt;
  return rows->front();
}

Result<std::vector<StoredBatch>> BatchStore::list(const std::string& owner, const std::string& after, int64_t limit) {
  std::string sql = std::string("SELECT ") + kColumns + " FROM batches WHERE owner = ?";
  std::vector<SqlValue> params = {owner};
  if (!after.empty()) {
    sql += " AND seq < (SELECT seq FROM batches WHERE id = ?)";
    params.emplace_back(after);
  }
  sql += " ORDER BY seq DESC LIMIT ?";
  params.emplace_back(limit);
  return batches_of(db_.query(sql, params));
}

Result<std::vector<StoredBatch>> BatchStore::open_batches() {
  return batches_of(db_.query(std::string("SELECT ") + kColumns +
                              " FROM batches WHERE status IN ('in_progress', 'cancelling') ORDER BY seq"));
}

Result<bool> BatchStore::mark_cancelling(const std::string& id, double now) {
  AUTOGLM_ASSIGN_OR_RETURN(auto rows, db_.query("UPDATE batches SET status = 'cancelling', cancelling_at = ? WHERE id "
                                                "= ? AND status = 'in_progress' RETURNING id",
                                                {now, id}));
  return !rows.empty();
}

Result<bool> BatchStore::finish(const StoredBatch& b) {
  AUTOGLM_ASSIGN_OR_RETURN(
      auto rows, db_.query("UPDATE batches SET status = ?, finalizing_at = ?, completed_at = ?, expired_at = ?, "
                           "cancelled_at = ?, output_file_id = ?, error_file_id = ?, total = ?, completed = ?, failed "
                           "= ? WHERE id = ? AND status IN ('in_progress', 'cancelling') RETURNING id",
                           {std::string(batch_status_name(b.status)), b.finalizing_at, b.completed_at, b.expired_at,
                            b.cancelled_at, b.output_file_id, b.error_file_id, b.total, b.completed, b.failed, b.id}));
  return !rows.empty();
}

std::vector<int64_t> BatchStore::counts() {
  std::vector<int64_t> out(kBatchStatusCount, 0);
  auto rows = db_.query("SELECT status, COUNT(*) FROM batches GROUP BY status");
  if (rows)
    for (const SqlRow& r : *rows)
      if (auto s = status_of(sql_text(r[0]))) out[int(*s)] = int64_t(sql_number(r[1]));
  return out;
}

Result<int64_t> BatchStore::remove_final_before(double before) {
  AUTOGLM_ASSIGN_OR_RETURN(
      auto rows, db_.query("DELETE FROM batches WHERE status IN ('completed', 'failed', 'expired', 'cancelled') AND "
                           "max(completed_at, expired_at, cancelled_at, failed_at) < ? RETURNING id",
                           {before}));
  return int64_t(rows.size());
}

}  // namespace autoglm
