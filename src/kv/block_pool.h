// The paged KV cache: one preallocated pool of fixed-size blocks shared by all
// sequences. Blocks are reference-counted; full blocks can be published under a
// hash chained over (parent hash, block tokens) so later requests with the same
// prefix reuse them. Unreferenced published blocks stay cached until evicted (LRU);
// with tiers (kv_tiers.h), an evicted block's bytes move to RAM or disk, and a
// lookup the pool misses copies them back into a block.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kv/kv_tiers.h"
#include "model/kv_cache.h"
#include "model/model_spec.h"

namespace autoglm {

class BlockPool {
 public:
  // The blocks live in the memory of `device` (the one whose backend runs the model).
  BlockPool(const ModelSpec& spec, int64_t n_blocks, int64_t block_size, const KvFormat& format,
            const Device& device = {});

  int64_t block_size() const { return block_size_; }
  int64_t n_blocks() const { return n_blocks_; }
  // Blocks that are referenced by at least one sequence.
  int64_t n_used() const { return n_used_; }

  // A block with one reference, or nullopt when every block is referenced.
  // Evicts the least recently released cached block when nothing is free.
  std::optional<int32_t> allocate();
  void add_ref(int32_t block);
  void release(int32_t block);

  // Prefix cache: the block published under `hash`, with one more reference.
  std::optional<int32_t> acquire_cached(uint64_t hash);
  // Makes a full block findable by its hash (no-op if another block has it).
  void publish(int32_t block, uint64_t hash);
  void set_prefix_caching(bool on) { prefix_caching_ = on; }
  // Where evicted cached blocks go (null: nowhere); it must outlive the pool. Host memory only.
  void set_tiers(KvTiers* tiers) { tiers_ = tiers; }
  // Every cached block to the tiers' disk, after what RAM holds, least recently used first (a
  // graceful stop or an unload: the next start finds what this one had).
  void save_to_disk_tier();
  // A block's bytes: every layer's keys, and its values (0 where the values are in the keys).
  int64_t block_key_bytes() const { return n_layer_ * block_size_ * format_.k_row_bytes; }
  int64_t block_value_bytes() const {
    return format_.values_in_keys ? 0 : n_layer_ * block_size_ * format_.v_row_bytes;
  }

  const KvFormat& format() const { return format_; }
  // First row of a block's positions for one layer.
  uint8_t* key(int32_t block, int64_t layer) {
    return keys_.data() + (int64_t(block) * n_layer_ + layer) * block_size_ * format_.k_row_bytes;
  }
  uint8_t* value(int32_t block, int64_t layer) {
    if (format_.values_in_keys) return key(block, layer);
    return values_.data() + (int64_t(block) * n_layer_ + layer) * block_size_ * format_.v_row_bytes;
  }

  // The hash of a full block of tokens that follows a prefix whose hash is `parent` (0 for none).
  static uint64_t chain_hash(uint64_t parent, const int32_t* tokens, int64_t n);

 private:
  void forget_hash(int32_t block);
  std::optional<int32_t> copy_back(uint64_t hash);

  int64_t n_blocks_, block_size_, n_layer_;
  KvFormat format_;
  DeviceMemory keys_, values_;
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;                          // never published or forgotten, unreferenced
  std::list<int32_t> lru_;                             // published and unreferenced, oldest first
  std::vector<std::list<int32_t>::iterator> lru_pos_;  // valid while the block is in lru_
  std::vector<bool> in_lru_;
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::vector<std::optional<uint64_t>> hash_of_;
  int64_t n_used_ = 0;
  bool prefix_caching_ = true;
  KvTiers* tiers_ = nullptr;
};

}  // namespace autoglm
