// The response cache: deterministic generations (greedy, or a fixed seed) kept as the engine's
// events of each choice, and replayed through a fresh response writer, so a hit answers with
// the same chunk shapes, text and usage as the first time (streamed or not). In memory: LRU
// bounded by entries and bytes, with a time to live.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "autoglm/engine.h"
#include "autoglm/runtime.h"
#include "autoglm/status.h"
#include "server/routing/cached_generation.h"

namespace autoglm {

struct ResponseCacheConfig {
  bool enabled = false;
  int64_t max_entries = 1024;
  int64_t max_bytes = int64_t(64) << 20;
  double ttl_s = 3600;
  std::string path;  // a SQLite file that keeps the entries across restarts ("": memory only)
};

// The key of a request, or nullopt when its output is not determined by it (sampling without a
// seed). It covers the model (`scope`), the route (chat or completions), the choices, and what
// the runtime says decides the output (PreparedRequest::output_key: the prompt as rendered,
// max_tokens, sampling with the model's defaults filled in, stop strings, the grammar's text,
// logprobs, how the reply is read, the adapters as loaded, and the prefix-cache salt: with
// prefix_cache_per_key each API key's own, so no key learns what another asked).
std::optional<std::string> response_cache_key(const std::string& scope, bool chat, const PreparedRequest& request,
                                              size_t choices);

class ResponseCacheFile;

class ResponseCache {
 public:
  // With config.path, the file is opened (or created) and its live entries read back; the
  // error names the file.
  static Result<std::shared_ptr<ResponseCache>> create(ResponseCacheConfig config);
  explicit ResponseCache(ResponseCacheConfig config);  // memory only
  ~ResponseCache();

  // The entry (counted as a hit), or null (a miss; an expired entry goes).
  std::shared_ptr<const CachedGeneration> find(const std::string& key);
  // Keeps a generation, evicting the least recently used entries past the bounds.
  void insert(const std::string& key, CachedGeneration generation);
  // Prometheus text: hits, misses, evictions, entries and bytes.
  std::string render_metrics() const;
  int64_t hits() const;

 private:
  using Clock = std::chrono::system_clock;  // expiry survives a restart
  struct Entry {
    std::string key;
    std::shared_ptr<const CachedGeneration> generation;
    Clock::time_point expires;
  };
  void erase(std::list<Entry>::iterator it);
  // Keeps an entry in memory (most recent first), evicting past the bounds.
  void add(const std::string& key, std::shared_ptr<const CachedGeneration> generation, Clock::time_point expires);

  ResponseCacheConfig config_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> by_key_;
  int64_t bytes_ = 0, hits_ = 0, misses_ = 0, evictions_ = 0;
  std::unique_ptr<ResponseCacheFile> file_;  // null: memory only
};

// Records each choice's events as a reply goes out; whole() once every choice ended with stop
// or length (anything else, an error or a cancel, is never cached).
class GenerationRecorder {
 public:
  explicit GenerationRecorder(size_t n_choices) { generation_.choices.resize(n_choices); }
  void record(const StreamEvent& event, size_t choice);
  bool whole() const;
  CachedGeneration take() { return std::move(generation_); }

 private:
  CachedGeneration generation_;
  size_t finished_ = 0;
  bool failed_ = false;
};

}  // namespace autoglm
