#include "server/store/sqlite_db.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include "core/log.h"

namespace autoglm {

namespace {

// What to do with a file that is not (or no longer) a usable store: it is left as it is.
constexpr const char* kDamaged =
    " (the file is left as it is: move it aside, or restore it from a backup, to start "
    "with an empty store)";
constexpr const char* kNotOurs = " (not an Open-AutoGLM store: move the file aside or choose another path)";

// Writes fail while a fault is set for the file's database (a test's full or broken disk).
std::atomic<int> g_fault{0};  // the SQLite code writes fail with (0: none)
std::mutex g_fault_mutex;
std::string g_fault_path;  // under g_fault_mutex

// A file of the "autoglm" VFS: the default VFS's file, behind it in the same allocation.
struct FaultFile {
  sqlite3_file base;
  sqlite3_file* real;
  const char* name;  // SQLite keeps it valid until xClose (null for temporary files)
};

sqlite3_file* real_of(sqlite3_file* f) {
  return reinterpret_cast<FaultFile*>(f)->real;
}

int write_fault(sqlite3_file* f) {
  const int code = g_fault.load();
  const char* name = reinterpret_cast<FaultFile*>(f)->name;
  if (code == 0 || !name) return SQLITE_OK;
  std::lock_guard<std::mutex> lock(g_fault_mutex);
  const std::string_view n(name);  // the database, or its -wal / -journal
  const bool covered =
      n.starts_with(g_fault_path) && (n.size() == g_fault_path.size() || n[g_fault_path.size()] == '-');
  return covered ? code : SQLITE_OK;
}

// Every method forwards to the real file; writes fail first while a fault covers the file.
sqlite3_io_methods fault_methods(int version) {
  sqlite3_io_methods m{};
  m.iVersion = version;
  m.xClose = [](sqlite3_file* f) { return real_of(f)->pMethods->xClose(real_of(f)); };
  m.xRead = [](sqlite3_file* f, void* p, int n, sqlite3_int64 at) {
    return real_of(f)->pMethods->xRead(real_of(f), p, n, at);
  };
  m.xWrite = [](sqlite3_file* f, const void* p, int n, sqlite3_int64 at) {
    const int fault = write_fault(f);
    return fault != SQLITE_OK ? fault : real_of(f)->pMethods->xWrite(real_of(f), p, n, at);
  };
  m.xTruncate = [](sqlite3_file* f, sqlite3_int64 size) { return real_of(f)->pMethods->xTruncate(real_of(f), size); };
  m.xSync = [](sqlite3_file* f, int flags) { return real_of(f)->pMethods->xSync(real_of(f), flags); };
  m.xFileSize = [](sqlite3_file* f, sqlite3_int64* size) { return real_of(f)->pMethods->xFileSize(real_of(f), size); };
  m.xLock = [](sqlite3_file* f, int level) { return real_of(f)->pMethods->xLock(real_of(f), level); };
  m.xUnlock = [](sqlite3_file* f, int level) { return real_of(f)->pMethods->xUnlock(real_of(f), level); };
  m.xCheckReservedLock = [](sqlite3_file* f, int* out) {
    return real_of(f)->pMethods->xCheckReservedLock(real_of(f), out);
  };
  m.xFileControl = [](sqlite3_file* f, int op, void* arg) {
    return real_of(f)->pMethods->xFileControl(real_of(f), op, arg);
  };
  m.xSectorSize = [](sqlite3_file* f) { return real_of(f)->pMethods->xSectorSize(real_of(f)); };
  m.xDeviceCharacteristics = [](sqlite3_file* f) { return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f)); };
  if (version < 2) return m;
  m.xShmMap = [](sqlite3_file* f, int page, int size, int extend, void volatile** p) {
    return real_of(f)->pMethods->xShmMap(real_of(f), page, size, extend, p);
  };
  m.xShmLock = [](sqlite3_file* f, int offset, int n, int flags) {
    return real_of(f)->pMethods->xShmLock(real_of(f), offset, n, flags);
  };
  m.xShmBarrier = [](sqlite3_file* f) { real_of(f)->pMethods->xShmBarrier(real_of(f)); };
  m.xShmUnmap = [](sqlite3_file* f, int del) { return real_of(f)->pMethods->xShmUnmap(real_of(f), del); };
  if (version < 3) return m;
  m.xFetch = [](sqlite3_file* f, sqlite3_int64 at, int n, void** p) {
    return real_of(f)->pMethods->xFetch(real_of(f), at, n, p);
  };
  m.xUnfetch = [](sqlite3_file* f, sqlite3_int64 at, void* p) {
    return real_of(f)->pMethods->xUnfetch(real_of(f), at, p);
  };
  return m;
}

const sqlite3_io_methods kFaultMethods[4] = {fault_methods(0), fault_methods(1), fault_methods(2), fault_methods(3)};

sqlite3_vfs* real_vfs(sqlite3_vfs* v) {
  return static_cast<sqlite3_vfs*>(v->pAppData);
}

// The default VFS with writes that a test can make fail.
sqlite3_vfs make_fault_vfs() {
  sqlite3_vfs* real = sqlite3_vfs_find(nullptr);
  sqlite3_vfs v = *real;
  v.iVersion = std::min(real->iVersion, 3);
  v.szOsFile = int(sizeof(FaultFile)) + real->szOsFile;
  v.pNext = nullptr;
  v.zName = "autoglm";
  v.pAppData = real;
  v.xOpen = [](sqlite3_vfs* self, const char* name, sqlite3_file* file, int flags, int* out_flags) {
    auto* f = reinterpret_cast<FaultFile*>(file);
    f->real = reinterpret_cast<sqlite3_file*>(f + 1);
    f->name = name;
    const int rc = real_vfs(self)->xOpen(real_vfs(self), name, f->real, flags, out_flags);
    const sqlite3_io_methods* m = f->real->pMethods;
    f->base.pMethods = m ? &kFaultMethods[std::min(m->iVersion, 3)] : nullptr;
    return rc;
  };
  v.xDelete = [](sqlite3_vfs* self, const char* name, int sync) {
    return real_vfs(self)->xDelete(real_vfs(self), name, sync);
  };
  v.xAccess = [](sqlite3_vfs* self, const char* name, int flags, int* out) {
    return real_vfs(self)->xAccess(real_vfs(self), name, flags, out);
  };
  v.xFullPathname = [](sqlite3_vfs* self, const char* name, int n, char* out) {
    return real_vfs(self)->xFullPathname(real_vfs(self), name, n, out);
  };
  v.xDlOpen = [](sqlite3_vfs* self, const char* name) { return real_vfs(self)->xDlOpen(real_vfs(self), name); };
  v.xDlError = [](sqlite3_vfs* self, int n, char* out) { real_vfs(self)->xDlError(real_vfs(self), n, out); };
  v.xDlSym = [](sqlite3_vfs* self, void* lib, const char* sym) {
    return real_vfs(self)->xDlSym(real_vfs(self), lib, sym);
  };
  v.xDlClose = [](sqlite3_vfs* self, void* lib) { real_vfs(self)->xDlClose(real_vfs(self), lib); };
  v.xRandomness = [](sqlite3_vfs* self, int n, char* out) {
    return real_vfs(self)->xRandomness(real_vfs(self), n, out);
  };
  v.xSleep = [](sqlite3_vfs* self, int us) { return real_vfs(self)->xSleep(real_vfs(self), us); };
  v.xCurrentTime = [](sqlite3_vfs* self, double* out) { return real_vfs(self)->xCurrentTime(real_vfs(self), out); };
  v.xGetLastError = [](sqlite3_vfs* self, int n, char* out) {
    return real_vfs(self)->xGetLastError(real_vfs(self), n, out);
  };
  if (v.iVersion >= 2)
    v.xCurrentTimeInt64 = [](sqlite3_vfs* self, sqlite3_int64* out) {
      return real_vfs(self)->xCurrentTimeInt64(real_vfs(self), out);
    };
  if (v.iVersion >= 3) {
    v.xSetSystemCall = [](sqlite3_vfs* self, const char* name, sqlite3_syscall_ptr call) {
      return real_vfs(self)->xSetSystemCall(real_vfs(self), name, call);
    };
    v.xGetSystemCall = [](sqlite3_vfs* self, const char* name) {
      return real_vfs(self)->xGetSystemCall(real_vfs(self), name);
    };
    v.xNextSystemCall = [](sqlite3_vfs* self, const char* name) {
      return real_vfs(self)->xNextSystemCall(real_vfs(self), name);
    };
  }
  return v;
}

// Registered once, not as the default.
const char* fault_vfs() {
  static sqlite3_vfs vfs = make_fault_vfs();
  static const int registered = sqlite3_vfs_register(&vfs, 0);
  (void)registered;
  return vfs.zName;
}

// The tables `schema` makes and their columns (run on an empty database in memory).
Result<std::map<std::string, std::set<std::string>>> schema_tables(const std::string& schema) {
  sqlite3* mem = nullptr;
  std::map<std::string, std::set<std::string>> tables;
  std::string why;
  auto add_column = [](void* out, int, char** values, char**) {
    auto* t = static_cast<std::map<std::string, std::set<std::string>>*>(out);
    (*t)[values[0]].insert(values[1]);
    return 0;
  };
  char* error = nullptr;
  if (sqlite3_open(":memory:", &mem) != SQLITE_OK ||
      sqlite3_exec(mem, schema.c_str(), nullptr, nullptr, &error) != SQLITE_OK ||
      sqlite3_exec(mem,
                   "SELECT m.name, c.name FROM sqlite_master m, pragma_table_info(m.name) c WHERE m.type = 'table' "
                   "AND m.name NOT LIKE 'sqlite_%'",
                   add_column, &tables, &error) != SQLITE_OK)
    why = error ? error : mem ? sqlite3_errmsg(mem) : "out of memory";
  sqlite3_free(error);
  sqlite3_close(mem);
  if (!why.empty()) return io_error("the store's schema: " + why);
  return tables;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

void sqlite_fail_writes(const std::string& path, WriteFault fault) {
  std::error_code ec;
  const std::filesystem::path full = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  std::lock_guard<std::mutex> lock(g_fault_mutex);
  g_fault_path = full.string();
  g_fault = fault == WriteFault::kDiskFull ? SQLITE_FULL : fault == WriteFault::kIoError ? SQLITE_IOERR_WRITE : 0;
}

Result<std::unique_ptr<SqliteDb>> SqliteDb::open(const std::string& path, const std::string& schema,
                                                 const std::string& role, int64_t max_bytes) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, fault_vfs()) != SQLITE_OK) {
    const std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return io_error(role + ": " + path + ": " + why);
  }
  std::unique_ptr<SqliteDb> out(new SqliteDb(db, role + ": " + path));
  sqlite3_busy_timeout(db, 5000);
  // Nothing is written (not even the switch to WAL) before the file is known to be a store's.
  AUTOGLM_RETURN_IF_ERROR(out->check_intact());
  AUTOGLM_RETURN_IF_ERROR(out->check_ours(schema));
  AUTOGLM_RETURN_IF_ERROR(out->check_columns(schema));
  // Pages of 4 KiB (SQLite's default): max_page_count caps the file at max_bytes.
  const std::string cap =
      max_bytes > 0 ? "PRAGMA max_page_count=" + std::to_string(std::max<int64_t>(8, max_bytes / 4096)) : "";
  for (const std::string& pragma : {std::string("PRAGMA journal_mode=WAL"), cap})
    if (!pragma.empty()) AUTOGLM_RETURN_IF_ERROR(out->exec(pragma));
  AUTOGLM_RETURN_IF_ERROR(out->apply_schema(schema));
  return out;
}

// SQLite meets most damage only when it reads the page: the file is read whole here, so that a
// damaged store stops the start instead of failing requests later. A WAL left by a crash is
// part of what is read (its committed pages count, its torn tail does not).
Status SqliteDb::check_intact() {
  const auto began = std::chrono::steady_clock::now();
  auto rows = query("PRAGMA quick_check(1)");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  if (took > 0.5)  // about a second per GiB: say where a slow start went
    log_line(LogLevel::kInfo, role_ + ": checked (PRAGMA quick_check) in " + std::to_string(took) + " s");
  if (!rows) {
    const Status& st = rows.status();
    return st.code() == StatusCode::kCorrupt ? corrupt(st.message() + kDamaged) : st;
  }
  std::string verdict = rows->empty() ? "no answer" : sql_text(rows->front()[0]);
  if (verdict == "ok") return Status::ok();
  std::replace(verdict.begin(), verdict.end(), '\n', ' ');
  return corrupt(role_ + ": the database is damaged (PRAGMA quick_check: " + verdict + ")" + kDamaged);
}

// A file with tables but none of the schema's is another program's database, not ours to add to.
Status SqliteDb::check_ours(const std::string& schema) {
  AUTOGLM_ASSIGN_OR_RETURN(const auto wanted, schema_tables(schema));
  AUTOGLM_ASSIGN_OR_RETURN(
      const auto rows,
      query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"));
  std::vector<std::string> present, ours;
  for (const SqlRow& r : rows) present.push_back(sql_text(r[0]));
  for (const auto& [table, columns] : wanted) ours.push_back("'" + table + "'");
  if (present.empty()) return Status::ok();
  for (const std::string& table : present)
    if (wanted.count(table)) return Status::ok();
  return corrupt(role_ + ": has tables " + joined(present) + " but none of " + joined(ours) + kNotOurs);
}

Status SqliteDb::apply_schema(const std::string& schema) {
  AUTOGLM_RETURN_IF_ERROR(check_columns(schema));
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  char* why = nullptr;
  const int rc = sqlite3_exec(db_, schema.c_str(), nullptr, nullptr, &why);
  const Status st = rc == SQLITE_OK ? Status::ok() : error(rc, why ? why : sqlite3_errmsg(db_));
  sqlite3_free(why);
  return st;
}

// A table of the schema already there must have the schema's columns (more are let be).
Status SqliteDb::check_columns(const std::string& schema) {
  AUTOGLM_ASSIGN_OR_RETURN(const auto wanted, schema_tables(schema));
  for (const auto& [table, columns] : wanted) {
    AUTOGLM_ASSIGN_OR_RETURN(const auto rows, query("SELECT name FROM pragma_table_info(?)", {table}));
    if (rows.empty()) continue;  // not there yet: the schema makes it
    std::set<std::string> present;
    for (const SqlRow& r : rows) present.insert(sql_text(r[0]));
    for (const std::string& column : columns)
      if (!present.count(column))
        return corrupt(role_ + ": has a table '" + table + "' without column '" + column + "'" + kNotOurs);
  }
  return Status::ok();
}

Status SqliteDb::error(int rc, const std::string& why) const {
  const std::string message = role_ + ": " + why;
  switch (rc & 0xff) {
    case SQLITE_FULL: return resource_exhausted(message);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return corrupt(message);
    default: return io_error(message);
  }
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
  if (const int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr); rc != SQLITE_OK) {
    const std::string why = sqlite3_errmsg(db_);
    sqlite3_finalize(st);
    return error(rc, why);
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
  if (rc != SQLITE_DONE) return error(rc, why);
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
