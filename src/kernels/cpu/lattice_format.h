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

// IQ2_XXS's grid takes three magnitudes (8, 25, 43), so an entry is 8 codes of 2 bits (0, 1, 2),
// and the grid two 256-byte tables, values 0..3 and 4..7 of each entry, that AVX-512 VBMI's byte
// permutes index in registers (lattice_kernels.inc). `place` and `shift` are that kernel's
// permute controls: place[h] gives row r of groups 4h..4h + 3 of a chunk of 8 a 64-bit lane of
// (low, high) code pairs, shift[k] takes value j of group k from bit 16 k + 2 j of it.
struct Iq2XxsCodes {
  alignas(64) uint8_t low[256] = {};   // value j < 4 of entry i at bits 2 j, 2 j + 1
  alignas(64) uint8_t high[256] = {};  // value 4 + j
  alignas(64) uint8_t place[2][64] = {};
  alignas(64) uint8_t shift[4][64] = {};
};

constexpr int iq2xxs_code(uint64_t entry, int j) {
  const int v = int((entry >> (8 * j)) & 0xff);
  return v == 0x08 ? 0 : v == 0x19 ? 1 : 2;
}

constexpr Iq2XxsCodes make_iq2xxs_codes() {
  Iq2XxsCodes c;
  for (int i = 0; i < 256; ++i)
    for (int j = 0; j < 4; ++j) {
      c.low[i] = uint8_t(c.low[i] | (iq2xxs_code(iq_grids::kIq2XxsGrid[i], j) << (2 * j)));
      c.high[i] = uint8_t(c.high[i] | (iq2xxs_code(iq_grids::kIq2XxsGrid[i], 4 + j) << (2 * j)));
    }
  for (int h = 0; h < 2; ++h)
    for (int r = 0; r < 8; ++r)
      for (int k = 0; k < 4; ++k) {  // a chunk's indexes are [group][row]; the high codes follow the low
        c.place[h][8 * r + 2 * k] = uint8_t(8 * (4 * h + k) + r);
        c.place[h][8 * r + 2 * k + 1] = uint8_t(64 + 8 * (4 * h + k) + r);
      }
  for (int k = 0; k < 4; ++k)
    for (int b = 0; b < 64; ++b) c.shift[k][b] = uint8_t(16 * k + 2 * (b % 8));
  return c;
}

inline constexpr Iq2XxsCodes kIq2XxsCodes = make_iq2xxs_codes();

// Code to magnitude as one affine map over GF(2) of a byte's two low bits (vgf2p8affineqb): 0 ->
// 0x08, bit 0 -> xor 0x11 (0x19), bit 1 -> xor 0x23 (0x2b); bit i of the result is the parity of
// the input and byte 7 - i of the matrix, xor bit i of the constant. Bits 2..7 are ignored.
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
