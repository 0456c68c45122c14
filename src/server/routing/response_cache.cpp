#include "server/routing/response_cache.h"

#include "server/metrics/metrics.h"
#include "server/routing/response_cache_file.h"

#include <xxhash.h>

#include <cstdio>

namespace autoglm {
namespace {

int64_t event_bytes(const StreamEvent& ev) {
  int64_t n = int64_t(sizeof(StreamEvent) + ev.text.size() + ev.tokens.size() * sizeof(int32_t) + ev.error.size());
  for (const TokenLogprob& lp : ev.logprobs) n += int64_t(sizeof(TokenLogprob) + lp.top.size() * 8);
  for (const OutputPart& part : ev.parts) n += int64_t(sizeof(OutputPart) + part.text.size());
  return n;
}

}  // namespace

std::optional<std::string> response_cache_key(const std::string& scope, bool chat, const PreparedRequest& request,
                                              size_t choices) {
  if (!request.deterministic()) return std::nullopt;
  std::string text = scope;
  text += chat ? "\nchat\n" : "\ncompletions\n";
  text += std::to_string(choices) + '\n';
  text += request.output_key();
  const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
  return std::string(hex);
}

ResponseCache::ResponseCache(ResponseCacheConfig config) : config_(std::move(config)) {}

ResponseCache::~ResponseCache() = default;

Result<std::shared_ptr<ResponseCache>> ResponseCache::create(ResponseCacheConfig config) {
  auto cache = std::make_shared<ResponseCache>(config);
  if (config.path.empty()) return cache;
  AUTOGLM_ASSIGN_OR_RETURN(cache->file_, ResponseCacheFile::open(config.path));
  std::vector<ResponseCacheFile::Row> rows = cache->file_->load();  // most recent first
  std::lock_guard<std::mutex> lock(cache->mutex_);
  for (auto row = rows.rbegin(); row != rows.rend(); ++row)
    cache->add(row->key, std::make_shared<const CachedGeneration>(std::move(row->generation)), row->expires);
  return cache;
}

std::shared_ptr<const CachedGeneration> ResponseCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_key_.find(key);
  if (it != by_key_.end() && it->second->expires <= Clock::now()) {
    erase(it->second);
    it = by_key_.end();
  }
  if (it == by_key_.end()) {
    ++misses_;
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  ++hits_;
  return it->second->generation;
}

void ResponseCache::insert(const std::string& key, CachedGeneration generation) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto old = by_key_.find(key); old != by_key_.end()) erase(old->second);
  if (generation.bytes > config_.max_bytes) return;  // would evict everything and still not fit
  const auto ttl = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config_.ttl_s));
  auto kept = std::make_shared<const CachedGeneration>(std::move(generation));
  if (file_) file_->put(key, *kept, Clock::now() + ttl);
  add(key, std::move(kept), Clock::now() + ttl);
}

void ResponseCache::add(const std::string& key, std::shared_ptr<const CachedGeneration> generation,
                        Clock::time_point expires) {
  bytes_ += generation->bytes;
  lru_.push_front({key, std::move(generation), expires});
  by_key_[key] = lru_.begin();
  while (int64_t(lru_.size()) > config_.max_entries || bytes_ > config_.max_bytes) {
    erase(std::prev(lru_.end()));
    ++evictions_;
  }
}

void ResponseCache::erase(std::list<Entry>::iterator it) {
  if (file_) file_->remove(it->key);
  bytes_ -= it->generation->bytes;
  by_key_.erase(it->key);
  lru_.erase(it);
}

int64_t ResponseCache::hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}

std::string ResponseCache::render_metrics() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, int64_t value) {
    metric_header(out, name, type, help);
    metric_sample(out, name, double(value));
  };
  metric("autoglm_response_cache_hits_total", "counter", "Requests answered from the response cache.", hits_);
  metric("autoglm_response_cache_misses_total", "counter", "Cacheable requests the cache did not hold.", misses_);
  metric("autoglm_response_cache_evictions_total", "counter", "Entries evicted by the entry or byte bound.",
         evictions_);
  metric("autoglm_response_cache_entries", "gauge", "Entries in the response cache.", int64_t(lru_.size()));
  metric("autoglm_response_cache_bytes", "gauge", "Bytes the response cache holds.", bytes_);
  return out;
}

void GenerationRecorder::record(const StreamEvent& ev, size_t choice) {
  if (choice >= generation_.choices.size()) return;
  generation_.choices[choice].push_back(ev);
  generation_.bytes += event_bytes(ev);
  if (!ev.finished) return;
  ++finished_;
  const FinishReason r = ev.finish_reason;
  if (r != FinishReason::kStop && r != FinishReason::kLength && r != FinishReason::kToolCalls) failed_ = true;
}

bool GenerationRecorder::whole() const {
  return !failed_ && finished_ == generation_.choices.size();
}

}  // namespace autoglm
