// A SQLite file in WAL mode, made with its schema, and statements with bound values: what the
// server's durable stores (the response cache's file, jobs) are written with. Errors name the
// file's role and SQLite's reason.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "autoglm/status.h"

struct sqlite3;

namespace autoglm {

struct SqlBlob {
  std::string bytes;
};
using SqlValue = std::variant<std::nullptr_t, int64_t, double, std::string, SqlBlob>;
using SqlRow = std::vector<SqlValue>;

class SqliteDb {
 public:
  // Opens or creates `path` and runs `schema` (CREATE ... IF NOT EXISTS); `role` names the file
  // in errors ("response_cache.path: /x.db: ..."). A file that is not a database is an error.
  // `max_bytes` (0: none) caps the file: past it writes fail as a full disk does
  // (kResourceExhausted, "database or disk is full").
  static Result<std::unique_ptr<SqliteDb>> open(const std::string& path, const std::string& schema,
                                                const std::string& role, int64_t max_bytes = 0);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // One statement, `params` bound to its ?s in order.
  Status exec(const std::string& sql, const std::vector<SqlValue>& params = {});
  Result<std::vector<SqlRow>> query(const std::string& sql, const std::vector<SqlValue>& params = {});
  // Runs `body`, whose statements (on this thread) are kept all together or not at all: an
  // error from `body` or from the commit rolls every one back. Other threads wait.
  Status transaction(const std::function<Status()>& body);
  const std::string& role() const { return role_; }

 private:
  SqliteDb(sqlite3* db, std::string role) : db_(db), role_(std::move(role)) {}
  Result<std::vector<SqlRow>> run(const std::string& sql, const std::vector<SqlValue>& params);

  std::recursive_mutex mutex_;  // one statement (or transaction) at a time on the connection
  sqlite3* db_;
  std::string role_;
};

// The rows of a query as T, each through `of` (the query's error as it is).
template <class T, class Of>
Result<std::vector<T>> rows_as(Result<std::vector<SqlRow>> rows, Of of) {
  if (!rows) return rows.status();
  std::vector<T> out;
  for (const SqlRow& r : *rows) out.push_back(of(r));
  return out;
}

// A column as text / number ("" or 0 for NULL and other types).
std::string sql_text(const SqlValue& v);
double sql_number(const SqlValue& v);

}  // namespace autoglm
