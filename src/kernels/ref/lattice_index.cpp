#include "kernels/ref/lattice_index.h"

#include <algorithm>
#include <numeric>

namespace autoglm::ref {
namespace {

// Candidates kept per lattice point: enough that a weighted error (which the unweighted distance
// ranks only roughly) still finds its best entry among them.
constexpr int kNeighbours = 24;

}  // namespace

LatticeIndex::LatticeIndex(const uint64_t* entries, int count, int dims, bool signed_bytes) : dims_(dims) {
  build(std::vector<uint64_t>(entries, entries + count), signed_bytes);
}

LatticeIndex::LatticeIndex(const uint32_t* entries, int count, int dims) : dims_(dims) {
  build(std::vector<uint64_t>(entries, entries + count), false);
}

void LatticeIndex::build(const std::vector<uint64_t>& entries, bool signed_bytes) {
  const size_t count = entries.size(), dims = size_t(dims_);
  values_.resize(count * dims);
  for (size_t i = 0; i < count; ++i)
    for (size_t j = 0; j < dims; ++j) {
      const auto byte = uint8_t(entries[i] >> (8 * j));
      values_[i * dims + j] = signed_bytes ? float(int8_t(byte)) : float(byte);
    }
  levels_ = values_;
  std::sort(levels_.begin(), levels_.end());
  levels_.erase(std::unique(levels_.begin(), levels_.end()), levels_.end());

  size_t points = 1;
  for (size_t j = 0; j < dims; ++j) points *= levels_.size();
  keep_ = std::min<size_t>(kNeighbours, count);
  nearest_.resize(points * keep_);
  on_grid_.resize(points);
  std::vector<float> distance(count);
  std::vector<uint16_t> order(count);
  for (size_t p = 0; p < points; ++p) {
    for (size_t i = 0; i < count; ++i) {
      float d = 0;
      size_t rest = p;
      for (size_t j = 0; j < dims; ++j, rest /= levels_.size()) {
        const float diff = levels_[rest % levels_.size()] - values_[i * dims + j];
        d += diff * diff;
      }
      distance[i] = d;
    }
    std::iota(order.begin(), order.end(), uint16_t(0));
    std::partial_sort(order.begin(), order.begin() + long(keep_), order.end(), [&](uint16_t a, uint16_t b) {
      return distance[a] < distance[b] || (distance[a] == distance[b] && a < b);
    });
    std::copy_n(order.begin(), keep_, nearest_.begin() + long(p * keep_));
    on_grid_[p] = distance[order[0]] == 0;
  }
}

int LatticeIndex::nearest_level(float v) const {
  int best = 0;
  for (int l = 1; l < int(levels_.size()); ++l)
    if (v > 0.5f * (levels_[size_t(l) - 1] + levels_[size_t(l)])) best = l;
  return best;
}

std::span<const uint16_t> LatticeIndex::candidates(const float* t, bool own_suffices) const {
  size_t point = 0;
  for (int j = dims_ - 1; j >= 0; --j) point = point * levels_.size() + size_t(nearest_level(t[j]));
  return {nearest_.data() + point * keep_, own_suffices && on_grid_[point] ? size_t(1) : keep_};
}

}  // namespace autoglm::ref
