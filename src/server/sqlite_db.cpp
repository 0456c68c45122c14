#include "server/sqlite_db.h"

#include <sqlite3.h>

#include <algorithm>

namespace autoglm {

Result<std::unique_ptr<SqliteDb>> SqliteDb::open(const std::string& path, const std::string& schema,
                                                 const std::string& role, int64_t max_bytes) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    const std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return io_error(role + ": " + path + ": " + why);
  }
  sqlite3_busy_timeout(db, 5000);
  char* error = nullptr;
  // Pages of 4 KiB (SQLite's default): max_page_count caps the file at max_bytes.
  const std::string cap =
      max_bytes > 0 ? "PRAGMA max_page_count=" + std::to_string(std::max<int64_t>(8, max_bytes / 4096)) + ";" : "";
  const std::string script = "PRAGMA journal_mode=WAL;" + cap + schema;
  if (sqlite3_exec(db, script.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string why = error ? error : "unknown error";
    sqlite3_free(error);
    sqlite3_close(db);
    return io_error(role + ": " + path + ": not a usable database: " + why);
  }
  return std::unique_ptr<SqliteDb>(new SqliteDb(db, role + ": " + path));
}

SqliteDb::~SqliteDb() {
  sqlite3_close(db_);
}

namespace {

void bind(sqlite3_stmt* st, int index, const SqlValue& v) {
  if (std::holds_alternative<int64_t>(v)) sqlite3_bind_int64(st, index, std::get<int64_t>(v));
  if (std::holds_alternative<double>(v)) sqlite3_bind_double(st, index, std::get<double>(v));
  if (const auto* s = std::get_if<std::string>(&v))
    sqlite3_bind_text(st, index, s->data(), int(s->size()), SQLITE_TRANSIENT);
  if (const auto* b = std::get_if<SqlBlob>(&v))
    sqlite3_bind_blob(st, index, b->bytes.data(), int(b->bytes.size()), SQLITE_TRANSIENT);
  if (std::holds_alternative<std::nullptr_t>(v)) sqlite3_bind_null(st, index);
}

SqlValue column(sqlite3_stmt* st, int i) {
  switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER: return int64_t(sqlite3_column_int64(st, i));
    case SQLITE_FLOAT: return sqlite3_column_double(st, i);
    case SQLITE_TEXT:
      return std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, i)),
                         size_t(sqlite3_column_bytes(st, i)));
    case SQLITE_BLOB: {
      const auto* p = static_cast<const char*>(sqlite3_column_blob(st, i));
      return SqlBlob{std::string(p, p + sqlite3_column_bytes(st, i))};
    }
    default: return nullptr;
  }
}

}  // namespace

Result<std::vector<SqlRow>> SqliteDb::run(const std::string& sql, const std::vector<SqlValue>& params) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    const std::string why = sqlite3_errmsg(db_);
    sqlite3_finalize(st);
    return io_error(role_ + ": " + why);
  }
  for (size_t i = 0; i < params.size(); ++i) bind(st, int(i + 1), params[i]);
  std::vector<SqlRow> rows;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    SqlRow row;
    for (int c = 0; c < sqlite3_column_count(st); ++c) row.push_back(column(st, c));
    rows.push_back(std::move(row));
  }
  const std::string why = rc == SQLITE_DONE ? "" : sqlite3_errmsg(db_);
  sqlite3_finalize(st);
  if (rc == SQLITE_FULL) return resource_exhausted(role_ + ": " + why);
  if (rc != SQLITE_DONE) return io_error(role_ + ": " + why);
  return rows;
}

Status SqliteDb::transaction(const std::function<Status()>& body) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  AUTOGLM_RETURN_IF_ERROR(exec("BEGIN IMMEDIATE"));
  Status st = body();
  if (st.is_ok()) st = exec("COMMIT");
  if (!st.is_ok()) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  return st;
}

Status SqliteDb::exec(const std::string& sql, const std::vector<SqlValue>& params) {
  auto rows = run(sql, params);
  return rows ? Status::ok() : rows.status();
}

Result<std::vector<SqlRow>> SqliteDb::query(const std::string& sql, const std::vector<SqlValue>& params) {
  return run(sql, params);
}

std::string sql_text(const SqlValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* b = std::get_if<SqlBlob>(&v)) return b->bytes;
  return "";
}

double sql_number(const SqlValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return double(*i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return 0;
}

}  // namespace autoglm
