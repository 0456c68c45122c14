#include "kv/paged_sequence.h"

#include <algorithm>

namespace autoglm {

bool PagedSequenceKv::reserve(int64_t n_positions) {
  const size_t had = blocks_.size();
  while (capacity() < n_positions) {
    auto b = pool_.allocate();
    if (!b) {
      for (size_t i = had; i < blocks_.size(); ++i) pool_.release(blocks_[i]);
      blocks_.resize(had);
      return false;
    }
    blocks_.push_back(*b);
  }
  return true;
}

void PagedSequenceKv::release_all() {
  for (int32_t b : blocks_)
    if (b >= 0) pool_.release(b);
  blocks_.clear();
}

void PagedSequenceKv::release_before(int64_t pos) {
  const int64_t n = std::min<int64_t>(pos / pool_.block_size(), int64_t(blocks_.size()));
  for (int64_t i = 0; i < n; ++i)
    if (blocks_[size_t(i)] >= 0) {
      pool_.release(blocks_[size_t(i)]);
      blocks_[size_t(i)] = -1;
    }
}

int64_t PagedSequenceKv::n_held() const {
  return int64_t(std::count_if(blocks_.begin(), blocks_.end(), [](int32_t b) { return b >= 0; }));
}

}  // namespace autoglm
