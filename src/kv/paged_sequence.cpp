#include "kv/paged_sequence.h"

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
  for (int32_t b : blocks_) pool_.release(b);
  blocks_.clear();
}

}  // namespace autoglm
