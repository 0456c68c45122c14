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

#include <cstddef>
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

// The grids of 256 entries whose values take few magnitudes (IQ2_XXS: 3, IQ3_XXS: 8): a value is a
// code (its magnitude's rank, 2 or 3 bits), and an entry's codes are two 256-byte tables (its first
// and second half of values) that AVX-512 VBMI's byte permutes index in registers
// (lattice_decode_by_permutes, lattice_kernels.inc). A chunk is 64 bytes of a block's [group][row]
// indexes: 8 groups of one index (IQ2_XXS) or 4 of two (IQ3_XXS). place[p] gives each row a 64-bit
// lane of half the chunk's groups, each index's (low, high) code bytes in turn; shift[k] takes value
// j of the lane's group k to byte j (vpmultishiftqb), and magnitude[] maps a byte's low code
// (vpermb reads 6 bits: the codes above repeat the table).
struct GridCodes {
  alignas(64) uint8_t low[256] = {};
  alignas(64) uint8_t high[256] = {};
  alignas(64) uint8_t place[2][64] = {};
  alignas(64) uint8_t shift[4][64] = {};
  alignas(64) uint8_t magnitude[64] = {};
  int groups_per_lane = 0;  // 4 (IQ2_XXS) or 2 (IQ3_XXS)
};

template <class Entry, size_t kEntries>
constexpr GridCodes make_grid_codes(const Entry (&grid)[kEntries]) {
  static_assert(kEntries == 256);
  constexpr int kValues = int(sizeof(Entry)), kIndexes = 8 / kValues, kHalf = kValues / 2;
  GridCodes c;
  uint8_t levels[8] = {};
  int n_levels = 0;
  const auto value = [&](int i, int j) { return uint8_t(uint64_t(grid[i]) >> (8 * j)); };
  for (int i = 0; i < 256; ++i)
    for (int j = 0; j < kValues; ++j) {
      int at = 0;
      while (at < n_levels && levels[at] < value(i, j)) ++at;
      if (at < n_levels && levels[at] == value(i, j)) continue;
      if (n_levels == 8) throw "a grid of more than 8 magnitudes";  // not a constant expression
      for (int k = n_levels++; k > at; --k) levels[k] = levels[k - 1];
      levels[at] = value(i, j);
    }
  const int bits = n_levels <= 4 ? 2 : 3;
  const auto code = [&](int i, int j) {
    int r = 0;
    while (levels[r] != value(i, j)) ++r;
    return r;
  };
  for (int i = 0; i < 256; ++i)
    for (int j = 0; j < kHalf; ++j) {
      c.low[i] = uint8_t(c.low[i] | (code(i, j) << (bits * j)));
      c.high[i] = uint8_t(c.high[i] | (code(i, kHalf + j) << (bits * j)));
    }
  c.groups_per_lane = 4 / kIndexes;
  for (int p = 0; p < 2; ++p)
    for (int r = 0; r < 8; ++r)
      for (int k = 0; k < c.groups_per_lane; ++k)
        for (int m = 0; m < kIndexes; ++m) {
          const int lane_byte = 8 * r + 2 * kIndexes * k + 2 * m;
          const int index_byte = 8 * kIndexes * (c.groups_per_lane * p + k) + kIndexes * r + m;
          c.place[p][lane_byte] = uint8_t(index_byte);           // its low codes
          c.place[p][lane_byte + 1] = uint8_t(64 + index_byte);  // its high codes
        }
  for (int k = 0; k < c.groups_per_lane; ++k)
    for (int b = 0; b < 64; ++b) {
      const int j = b % 8, m = j / kValues, half = (j % kValues) / kHalf, at = j % kHalf;
      c.shift[k][b] = uint8_t(16 * kIndexes * k + 16 * m + 8 * half + bits * at);
    }
  for (int b = 0; b < 64; ++b) c.magnitude[b] = levels[b & ((1 << bits) - 1)];
  return c;
}

inline constexpr GridCodes kIq2XxsCodes = make_grid_codes(iq_grids::kIq2XxsGrid);
inline constexpr GridCodes kIq3XxsCodes = make_grid_codes(iq_grids::kIq3XxsGrid);

// IQ2_XXS's code to magnitude as one affine map over GF(2) of a byte's two low bits
// (vgf2p8affineqb, which runs beside the permutes where vpermb would queue with them): 0 -> 0x08,
// bit 0 -> xor 0x11 (0x19), bit 1 -> xor 0x23 (0x2b). Bit i of the result is the parity of the
// input and byte 7 - i of the matrix, xor bit i of the constant; bits 2..7 are ignored.
inline constexpr uint64_t kIq2XxsMagnitudeMatrix = 0x0302000001020000ULL;  // bits 0, 1, 4, 5 of the result
inline constexpr uint8_t kIq2XxsMagnitudeConstant = 0x08;

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
