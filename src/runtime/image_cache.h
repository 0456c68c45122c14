// Image embeddings by content hash, least recently used first out past a byte budget: an agent
// that sends the same screenshot again (or a conversation resent whole each turn) pays for
// its vision tower once. Safe from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "model/vision_encoder.h"

namespace autoglm {

using ImageKey = std::pair<uint64_t, uint64_t>;  // a 128-bit content hash

class ImageCache {
 public:
  explicit ImageCache(int64_t budget_bytes) : budget_(budget_bytes) {}
  std::shared_ptr<const ImageEmbedding> find(const ImageKey& key);
  void put(const ImageKey& key, std::shared_ptr<const ImageEmbedding> embedding);
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 private:
  struct Entry {
    std::shared_ptr<const ImageEmbedding> embedding;
    std::list<ImageKey>::iterator order;
  };
  std::mutex mutex_;
  int64_t budget_, bytes_ = 0;
  std::atomic<int64_t> hits_{0}, misses_{0};
  std::map<ImageKey, Entry> entries_;
  std::list<ImageKey> order_;  // most recently used at the back
};

}  // namespace autoglm
