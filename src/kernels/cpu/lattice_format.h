// The packed layout of the lattice types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M,
// shared by the packer (pack_lattice.cpp) and the kernel (packed_int_kernels.inc). One block holds
// a super-block of 256 values of 8 rows:
//   the rows' fp16 d (16 bytes);
//   a scale code per run and row, [run][row] (odd, 1..31: the run's scale is d * factor * code);
//   per group of 8 values, [group][row][k]: the row's grid indexes (one into a grid of 8-value
//   entries, two into one of 4-value entries; 1 or 2 bytes each);
//   per group, [group][row]: the 8 sign bits (the parity bit made explicit); none for IQ1, whose
//   entries (kIq1Entries) are signed, 8 g + 1 or 8 g - 1: the group's delta of +-1/8 folded in.
// The kernel reads a row's entries with scalar loads (faster than gathers on Zen 4/5 by 3x) and
// multiplies 8 rows' magnitudes by the sign-flipped activations.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/ref/iq_grids.h"

namespace autoglm::cpu {

// IQ1's grid (-1, 0, 1) as int8 entries 8 g + 1 (index < 2048) and 8 g - 1 (index + 2048).
struct Iq1Entries {
  uint64_t entry[4096] = {};
};

constexpr Iq1Entries make_iq1_entries() {
  Iq1Entries e;
  for (int i = 0; i < 4096; ++i)
    for (int j = 0; j < 8; ++j) {
      const int g = int8_t(uint8_t(iq_grids::kIq1SGrid[i % 2048] >> (8 * j)));
      e.entry[i] |= uint64_t(uint8_t(int8_t(8 * g + (i < 2048 ? 1 : -1)))) << (8 * j);
    }
  return e;
}

inline constexpr Iq1Entries kIq1Entries = make_iq1_entries();

struct LatticeFormat {
  const uint64_t* grid8;  // 8-value entries, or
  const uint32_t* grid4;  // 4-value entries
  int index_bytes;
  int scale_runs;  // runs of 256 / scale_runs values share a scale code
  float factor;
  bool signed_entries = false;  // IQ1: no sign bytes

  constexpr int indexes_per_group() const { return grid8 ? 1 : 2; }
  constexpr int64_t scales_offset() const { return 16; }
  constexpr int64_t indexes_offset() const { return 16 + 8 * scale_runs; }
  constexpr int64_t signs_offset() const { return indexes_offset() + 32 * 8 * indexes_per_group() * index_bytes; }
  constexpr int64_t block_bytes() const { return signs_offset() + (signed_entries ? 0 : 32 * 8); }
};

constexpr bool is_lattice(DType t) {
  return t == DType::IQ2_XXS || t == DType::IQ2_XS || t == DType::IQ2_S || t == DType::IQ3_XXS || t == DType::IQ3_S ||
         t == DType::IQ1_S || t == DType::IQ1_M;
}

constexpr LatticeFormat lattice_format(DType t) {
  switch (t) {
    case DType::IQ2_XXS: return {iq_grids::kIq2XxsGrid, nullptr, 1, 8, 0.125f};  // d (0.5 + s) / 4
    case DType::IQ2_XS: return {iq_grids::kIq2XsGrid, nullptr, 2, 16, 0.125f};
    case DType::IQ2_S: return {iq_grids::kIq2SGrid, nullptr, 2, 16, 0.125f};
    case DType::IQ3_XXS: return {nullptr, iq_grids::kIq3XxsGrid, 1, 8, 0.25f};   // d (0.5 + s) / 2
    case DType::IQ1_S: return {kIq1Entries.entry, nullptr, 2, 8, 0.125f, true};  // d (2 s + 1) (8 g +- 1) / 8
    case DType::IQ1_M: return {kIq1Entries.entry, nullptr, 2, 16, 0.125f, true};
    default: return {nullptr, iq_grids::kIq3SGrid, 2, 8, 1.0f};  // IQ3_S: d (1 + 2 s)
  }
}

// Writes one packed block of 8 rows from their file blocks (null: a row past the end, left zero).
void pack_lattice(DType t, const uint8_t* const* src, uint8_t* out);

}  // namespace autoglm::cpu
