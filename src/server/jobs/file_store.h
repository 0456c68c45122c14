// Uploaded and produced files (OpenAI's /v1/files): rows of the jobs database, so that a batch's
// input and output survive a restart with it. Each belongs to the key that made it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "server/store/sqlite_db.h"

namespace autoglm {

struct StoredFile {
  std::string id;  // "file-..."
  std::string owner;
  std::string purpose;  // batch (uploaded), batch_output (a batch's output or errors)
  std::string filename;
  int64_t bytes = 0;
  double created_at = 0;
};

class FileStore {
 public:
  // Makes the table in `db` when it is not there yet.
  static Result<std::unique_ptr<FileStore>> open(SqliteDb& db);

  // Inside a caller's SqliteDb::transaction too.
  Status add(const StoredFile& file, const std::string& content);
  std::optional<StoredFile> get(const std::string& id);
  Result<std::string> content(const std::string& id);
  // Newest first, only `owner`'s; `purpose` "" : any; `after`: the id the last page ended with.
  Result<std::vector<StoredFile>> list(const std::string& owner, const std::string& purpose, const std::string& after,
                                       int64_t limit);
  Result<bool> remove(const std::string& id);
  // Files made before `before`, except those `keep` names: how many went.
  Result<int64_t> remove_created_before(double before, const std::vector<std::string>& keep);

 private:
  explicit FileStore(SqliteDb& db) : db_(db) {}
  SqliteDb& db_;
};

}  // namespace autoglm
