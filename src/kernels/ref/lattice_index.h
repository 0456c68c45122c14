// A lattice grid of the IQ1/IQ2/IQ3 types as an encoder searches it. A grid holds a few hundred
// to a couple of thousand of the points whose coordinates take the type's levels; a run of values
// divided by its scale rounds, coordinate by coordinate, to a point of the full lattice, and the
// grid entries nearest that point are the candidates worth weighing (an exhaustive search over
// the grid costs up to a hundred times more for the same choice almost always).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace autoglm::ref {

class LatticeIndex {
 public:
  // entries[i] holds dims values, one per byte; signed_bytes reads them as int8 (IQ1's -1, 0, 1).
  LatticeIndex(const uint64_t* entries, int count, int dims, bool signed_bytes);
  LatticeIndex(const uint32_t* entries, int count, int dims);

  int dims() const { return dims_; }
  float top_level() const { return levels_.back(); }
  float second_level() const { return levels_[levels_.size() - 2]; }
  // The dims values of entry i.
  const float* entry(int i) const { return &values_[size_t(i) * size_t(dims_)]; }
  // The entries nearest the lattice point that t (dims coordinates) rounds to, nearest first; only
  // that point's own entry where it is one and own_suffices (each coordinate then sits at its
  // nearest level: no other entry has a smaller error, whatever the weights).
  std::span<const uint16_t> candidates(const float* t, bool own_suffices = true) const;

 private:
  void build(const std::vector<uint64_t>& entries, bool signed_bytes);
  int nearest_level(float v) const;

  int dims_;
  std::vector<float> levels_;      // the distinct values, ascending
  std::vector<float> values_;      // entry-major
  size_t keep_ = 0;                // candidates a lattice point
  std::vector<uint16_t> nearest_;  // keep_ a lattice point
  std::vector<bool> on_grid_;      // a lattice point that is an entry
};

}  // namespace autoglm::ref
