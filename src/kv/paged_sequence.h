// One sequence's view of the block pool: its block table, as the KvCache the model reads.
#pragma once

#include <vector>

#include "kv/block_pool.h"
#include "model/kv_cache.h"

namespace autoglm {

class PagedSequenceKv final : public KvCache {
 public:
  explicit PagedSequenceKv(BlockPool& pool) : KvCache(pool.format()), pool_(pool) {}
  ~PagedSequenceKv() override { release_all(); }
  PagedSequenceKv(const PagedSequenceKv&) = delete;
  PagedSequenceKv& operator=(const PagedSequenceKv&) = delete;

  int64_t capacity() const override { return int64_t(blocks_.size()) * pool_.block_size(); }
  int64_t span() const override { return pool_.block_size(); }
  uint8_t* key_span(int64_t layer, int64_t first_pos) override {
    return pool_.key(blocks_[size_t(first_pos / pool_.block_size())], layer);
  }
  uint8_t* value_span(int64_t layer, int64_t first_pos) override {
    return pool_.value(blocks_[size_t(first_pos / pool_.block_size())], layer);
  }

  const std::vector<int32_t>& blocks() const { return blocks_; }
  // Appends a block the caller already holds a reference to.
  void append_block(int32_t block) { blocks_.push_back(block); }
  // Grows the table to hold `n_positions`; false (table unchanged) if the pool is out of blocks.
  bool reserve(int64_t n_positions);
  void release_all();
  // Returns the blocks that hold only positions below `pos` (a sliding window has moved past
  // them); their table entries stay, as -1, and must not be read again.
  void release_before(int64_t pos);
  int64_t n_held() const;  // blocks still held

 private:
  BlockPool& pool_;
  std::vector<int32_t> blocks_;
};

}  // namespace autoglm
