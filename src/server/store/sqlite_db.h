// A SQLite file in WAL mode, made with its schema, and statements with bound values: what the
// server's durable stores (the response cache's file, jobs) are written with. Errors name the
// file's role and SQLite's reason. A file that holds data is never made over: a damaged one, or
// another program's database, is an error at open that names it, and the file is left as it is.
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
  // in errors ("response_cache.path: /x.db: ..."). kCorrupt, naming the file: it is not a
  // database, or damaged (PRAGMA quick_check reads it whole), or another program's (it has
  // tables but none of `schema`'s, or one of them lacks a column). A WAL left by a crash is
  // read, not taken for damage. `max_bytes` (0: none) caps the file: past it writes fail as a
  // full disk does (kResourceExhausted, "database or disk is full").
  static Result<std::unique_ptr<SqliteDb>> open(const std::string& path, const std::string& schema,
                                                const std::string& role, int64_t max_bytes = 0);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // Makes what `schema` makes that is not there yet; a table already there must have every
  // column `schema` gives it (kCorrupt naming the table and the column).
  Status apply_schema(const std::string& schema);
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
  Status error(int rc, const std::string& why) const;  // SQLite's code as a Status naming the file
  Status check_intact();
  Status check_ours(const std::string& schema);
  Status check_columns(const std::string& schema);

  std::recursive_mutex mutex_;  // one statement (or transaction) at a time on the connection
  sqlite3* db_;
  std::string role_;
};

// For tests: a full or a failing disk under the files of the database at `path` (it, its WAL
// and its journal): from now on every write to them fails as SQLite sees a full disk
// (kDiskFull: SQLITE_FULL) or a broken one (kIoError: SQLITE_IOERR_WRITE), until kNone. Covers
// the files SqliteDb opened before the call too; reads go on.
enum class WriteFault { kNone, kDiskFull, kIoError };
void sqlite_fail_writes(const std::string& path, WriteFault fault);

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
