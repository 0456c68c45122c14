#include "server/jobs/file_store.h"

#include <set>

namespace autoglm {
namespace {

constexpr const char* kColumns = "id, owner, purpose, filename, bytes, created_at";

StoredFile file_of(const SqlRow& r) {
  return {sql_text(r[0]), sql_text(r[1]), sql_text(r[2]), sql_text(r[3]), int64_t(sql_number(r[4])), sql_number(r[5])};
}

}  // namespace

Result<std::unique_ptr<FileStore>> FileStore::open(SqliteDb& db) {
  AUTOGLM_RETURN_IF_ERROR(db.apply_schema(
      "CREATE TABLE IF NOT EXISTS files (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, "
      "owner TEXT NOT NULL, purpose TEXT NOT NULL, filename TEXT NOT NULL, bytes INTEGER NOT NULL, created_at "
      "REAL NOT NULL, content BLOB NOT NULL)"));
  return std::unique_ptr<FileStore>(new FileStore(db));
}

Status FileStore::add(const StoredFile& f, const std::string& content) {
  return db_.exec(std::string("INSERT INTO files (") + kColumns + ", content) VALUES (?, ?, ?, ?, ?, ?, ?)",
                  {f.id, f.owner, f.purpose, f.filename, int64_t(content.size()), f.created_at, SqlBlob{content}});
}

std::optional<StoredFile> FileStore::get(const std::string& id) {
  auto rows = db_.query(std::string("SELECT ") + kColumns + " FROM files WHERE id = ?", {id});
  if (!rows || rows->empty()) return std::nullopt;
  return file_of(rows->front());
}

Result<std::string> FileStore::content(const std::string& id) {
  AUTOGLM_ASSIGN_OR_RETURN(auto rows, db_.query("SELECT content FROM files WHERE id = ?", {id}));
  if (rows.empty()) return not_found("no file '" + id + "'");
  return sql_text(rows.front()[0]);
}

Result<std::vector<StoredFile>> FileStore::list(const std::string& owner, const std::string& purpose,
                                                const std::string& after, int64_t limit) {
  std::string sql = std::string("SELECT ") + kColumns + " FROM files WHERE owner = ?";
  std::vector<SqlValue> params = {owner};
  if (!purpose.empty()) {
    sql += " AND purpose = ?";
    params.emplace_back(purpose);
  }
  if (!after.empty()) {
    sql += " AND seq < (SELECT seq FROM files WHERE id = ?)";
    params.emplace_back(after);
  }
  sql += " ORDER BY seq DESC LIMIT ?";
  params.emplace_back(limit);
  return rows_as<StoredFile>(db_.query(sql, params), file_of);
}

Result<bool> FileStore::remove(const std::string& id) {
  AUTOGLM_ASSIGN_OR_RETURN(auto rows, db_.query("DELETE FROM files WHERE id = ? RETURNING id", {id}));
  return !rows.empty();
}

Result<int64_t> FileStore::remove_created_before(double before, const std::vector<std::string>& keep) {
  AUTOGLM_ASSIGN_OR_RETURN(auto rows, db_.query("SELECT id FROM files WHERE created_at < ?", {before}));
  const std::set<std::string> kept(keep.begin(), keep.end());
  int64_t removed = 0;
  for (const SqlRow& r : rows) {
    if (kept.count(sql_text(r[0]))) continue;
    AUTOGLM_ASSIGN_OR_RETURN(const bool gone, remove(sql_text(r[0])));
    removed += gone;
  }
  return removed;
}

}  // namespace autoglm
