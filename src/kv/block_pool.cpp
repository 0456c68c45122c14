#include "kv/block_pool.h"

#include <algorithm>

#include <xxhash.h>

#include "core/check.h"

namespace autoglm {

BlockPool::BlockPool(const ModelSpec& spec, int64_t n_blocks, int64_t block_size, const KvFormat& format,
                     const Device& device)
    : n_blocks_(n_blocks),
      block_size_(block_size),
      n_layer_(spec.n_layer),
      format_(format),
      keys_(DeviceMemory::allocate_or_die(device, n_blocks * spec.n_layer * block_size * format.k_row_bytes,
                                          "KV pool keys")),
      values_(DeviceMemory::allocate_or_die(device, n_blocks * spec.n_layer * block_size * format.value_bytes(),
                                            "KV pool values")),
      refs_(static_cast<size_t>(n_blocks), 0),
      lru_pos_(static_cast<size_t>(n_blocks)),
      in_lru_(static_cast<size_t>(n_blocks), false),
      hash_of_(static_cast<size_t>(n_blocks)) {
  for (int64_t b = n_blocks - 1; b >= 0; --b) free_.push_back(int32_t(b));
}

uint64_t BlockPool::chain_hash(uint64_t parent, const int32_t* tokens, int64_t n) {
  return XXH3_64bits_withSeed(tokens, size_t(n) * sizeof(int32_t), parent);
}

std::optional<int32_t> BlockPool::allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    in_lru_[size_t(b)] = false;
    if (tiers_ && hash_of_[size_t(b)])
      tiers_->put(*hash_of_[size_t(b)], key(b, 0), block_key_bytes(), value(b, 0), block_value_bytes());
    forget_hash(b);
  } else {
    return std::nullopt;
  }
  refs_[size_t(b)] = 1;
  ++n_used_;
  return b;
}

void BlockPool::add_ref(int32_t b) {
  if (refs_[size_t(b)]++ == 0) {
    if (in_lru_[size_t(b)]) {
      lru_.erase(lru_pos_[size_t(b)]);
      in_lru_[size_t(b)] = false;
    }
    ++n_used_;
  }
}

void BlockPool::release(int32_t b) {
  AUTOGLM_CHECK(refs_[size_t(b)] > 0);
  if (--refs_[size_t(b)] > 0) return;
  --n_used_;
  if (hash_of_[size_t(b)] && prefix_caching_) {
    lru_pos_[size_t(b)] = lru_.insert(lru_.end(), b);
    in_lru_[size_t(b)] = true;
  } else {
    forget_hash(b);
    free_.push_back(b);
  }
}

std::optional<int32_t> BlockPool::acquire_cached(uint64_t hash) {
  if (!prefix_caching_) return std::nullopt;
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return copy_back(hash);
  add_ref(it->second);
  return it->second;
}

void BlockPool::save_to_disk_tier() {
  if (!tiers_ || !tiers_->has_disk()) return;
  std::vector<int32_t> blocks(lru_.begin(), lru_.end());  // released, oldest first
  for (int32_t b = 0; b < int32_t(n_blocks_); ++b)
    if (refs_[size_t(b)] > 0 && hash_of_[size_t(b)]) blocks.push_back(b);  // still held: the most recent
  // Only the newest that fit the budget are written (the rest would be trimmed as they land).
  const int64_t file_bytes = tiers_->file_bytes(block_key_bytes() + block_value_bytes());
  const int64_t budget = tiers_->disk_budget();
  const size_t fit =
      budget > 0 ? size_t(std::min<int64_t>(int64_t(blocks.size()), budget / file_bytes)) : blocks.size();
  tiers_->flush_ram_to_disk(int64_t(fit) * file_bytes);
  for (size_t i = blocks.size() - fit; i < blocks.size(); ++i) {
    const int32_t b = blocks[i];
    tiers_->save(*hash_of_[size_t(b)], key(b, 0), block_key_bytes(), value(b, 0), block_value_bytes());
  }
}

// A block the tiers hold, copied into a block of the pool and published again.
std::optional<int32_t> BlockPool::copy_back(uint64_t hash) {
  if (!tiers_ || !tiers_->find(hash)) return std::nullopt;  // no block evicted for a miss
  const std::optional<int32_t> b = allocate();
  if (!b) return std::nullopt;
  if (!tiers_->take(hash, key(*b, 0), block_key_bytes(), value(*b, 0), block_value_bytes())) {
    release(*b);
    return std::nullopt;
  }
  publish(*b, hash);
  return b;
}

void BlockPool::publish(int32_t b, uint64_t hash) {
  if (!prefix_caching_ || hash_of_[size_t(b)] || by_hash_.count(hash)) return;
  by_hash_[hash] = b;
  hash_of_[size_t(b)] = hash;
}

void BlockPool::forget_hash(int32_t b) {
  if (!hash_of_[size_t(b)]) return;
  by_hash_.erase(*hash_of_[size_t(b)]);
  hash_of_[size_t(b)].reset();
}

}  // namespace autoglm
