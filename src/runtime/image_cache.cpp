#include "runtime/image_cache.h"

namespace autoglm {
namespace {

int64_t bytes_of(const ImageEmbedding& e) {
  return int64_t(e.values.size() * sizeof(float));
}

}  // namespace

std::shared_ptr<const ImageEmbedding> ImageCache::find(const ImageKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  order_.splice(order_.end(), order_, it->second.order);
  return it->second.embedding;
}

void ImageCache::put(const ImageKey& key, std::shared_ptr<const ImageEmbedding> embedding) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (entries_.count(key) || bytes_of(*embedding) > budget_) return;
  bytes_ += bytes_of(*embedding);
  order_.push_back(key);
  entries_[key] = {std::move(embedding), std::prev(order_.end())};
  while (bytes_ > budget_ && !order_.empty()) {
    auto oldest = entries_.find(order_.front());
    bytes_ -= bytes_of(*oldest->second.embedding);
    entries_.erase(oldest);
    order_.pop_front();
  }
}

}  // namespace autoglm
