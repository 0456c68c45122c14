// The response cache's SQLite file (response_cache.path): every entry the cache keeps is
// written there, every one it drops is deleted, and a restarted server reads back those still
// within their time to live.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "server/routing/cached_generation.h"
#include "server/store/sqlite_db.h"

namespace autoglm {

class ResponseCacheFile {
 public:
  // Opens (or creates) the file; the error names it.
  static Result<std::unique_ptr<ResponseCacheFile>> open(const std::string& path);
  ~ResponseCacheFile();
  ResponseCacheFile(const ResponseCacheFile&) = delete;
  ResponseCacheFile& operator=(const ResponseCacheFile&) = delete;

  struct Row {
    std::string key;
    CachedGeneration generation;
    std::chrono::system_clock::time_point expires;
  };
  // The entries not yet expired, most recently written first.
  std::vector<Row> load();
  void put(const std::string& key, const CachedGeneration& generation, std::chrono::system_clock::time_point expires);
  void remove(const std::string& key);

 private:
  explicit ResponseCacheFile(std::unique_ptr<SqliteDb> db) : db_(std::move(db)) {}
  std::unique_ptr<SqliteDb> db_;
};

}  // namespace autoglm
