// The lattice types' (IQ1/IQ2/IQ3) super-blocks of 256 values read field by field: the one parser
// of their bit layouts, for the reference decoders (block_decode.h) and the packer
// (kernels/cpu/pack_lattice.cpp). In an unnamed namespace as block_decode.h is, for the same reason.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace autoglm {
namespace {

// One super-block: the groups of 8 values are 0..31, a run of values shares a scale code.
struct LatticeFields {
  uint16_t d = 0;                // fp16 bits
  int runs = 8;                  // 8 runs of 32 values, or 16 of 16
  uint8_t codes[16] = {};        // per run: odd, 1..31 (2 s + 1)
  uint16_t indexes[32][2] = {};  // per group: one index into an 8-value grid, or two into a 4-value one;
                                 // IQ1: bit 11 set where the group's delta is negative
  uint8_t signs[32] = {};        // per group, bit j: value j negative (none for IQ1)

  int code_of_group(int g) const { return codes[g * runs / 32]; }
};

// An 8-bit sign mask from its 7 stored bits: the eighth makes the count of set bits even.
inline uint8_t iq_signs(uint32_t seven) {
  return uint8_t(seven | (uint32_t(__builtin_popcount(seven) & 1) << 7));
}

inline uint32_t lattice_word(const uint8_t* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

inline uint16_t lattice_half_word(const uint8_t* p) {
  uint16_t w;
  std::memcpy(&w, p, 2);
  return w;
}

// Two 4-bit scales a byte, the low nibble first.
inline uint8_t lattice_nibble(const uint8_t* bytes, int i) {
  return uint8_t(i % 2 ? bytes[i / 2] >> 4 : bytes[i / 2] & 0x0f);
}

// IQ1_M keeps its fp16 d in the top nibbles of its four scale words.
inline uint16_t iq1_m_scale_bits(const uint8_t* b) {
  uint16_t bits = 0;
  for (int k = 0; k < 4; ++k) bits = uint16_t(bits | ((lattice_half_word(b + 48 + 2 * k) >> 12) << (4 * k)));
  return bits;
}

// Group g (of run g / 4 of 8) of a block of type t. The layouts, from the start of the block:
//   IQ2_XXS: fp16 d; per run two 32-bit words: four grid indexes (the bytes of the first), four
//            7-bit sign groups and a 4-bit scale (the top of the second).
//   IQ2_XS:  fp16 d; 32 16-bit codes (9-bit index, 7 sign bits); 8 bytes of two 4-bit scales.
//   IQ2_S:   fp16 d; 32 low bytes of 10-bit indexes; 32 sign bytes; 8 bytes of the indexes' top 2
//            bits (a bit pair per group); 8 bytes of two 4-bit scales.
//   IQ3_XXS: fp16 d; 64 index bytes (4 values each); per run a 32-bit word of four 7-bit sign
//            groups and a 4-bit scale.
//   IQ3_S:   fp16 d; 64 low bytes of 9-bit indexes; 8 bytes of their top bits (one per index of a
//            run); 32 sign bytes; 4 bytes of two 4-bit scales (1 + 2 s), one per run.
//   IQ1_S:   fp16 d; 32 low bytes of 11-bit indexes; per run a 16-bit word: the indexes' top 3
//            bits (3 per group), a 3-bit scale and the sign of the run's delta.
//   IQ1_M:   32 low bytes of 11-bit indexes; 16 bytes, a nibble per group: the index's top 3 bits
//            and the sign of its delta; four 16-bit scale words: 3-bit scales (one per half run)
//            in their low 12 bits, the fp16 d in their top nibbles.
inline void read_lattice_group(DType t, const uint8_t* b, int g, LatticeFields& f) {
  const int run = g / 4, l = g % 4;
  switch (t) {
    case DType::IQ2_XXS: {
      const uint32_t w0 = lattice_word(b + 2 + 8 * run), w1 = lattice_word(b + 6 + 8 * run);
      f.codes[run] = uint8_t(2 * (w1 >> 28) + 1);
      f.indexes[g][0] = uint16_t((w0 >> (8 * l)) & 0xff);
      f.signs[g] = iq_signs((w1 >> (7 * l)) & 127);
      break;
    }
    case DType::IQ2_XS: {
      const uint16_t q = lattice_half_word(b + 2 + 2 * g);
      f.codes[g / 2] = uint8_t(2 * lattice_nibble(b + 66, g / 2) + 1);
      f.indexes[g][0] = q & 511;
      f.signs[g] = iq_signs(q >> 9);
      break;
    }
    case DType::IQ2_S:
      f.codes[g / 2] = uint8_t(2 * lattice_nibble(b + 74, g / 2) + 1);
      f.indexes[g][0] = uint16_t(b[2 + g] | ((b[66 + run] << (8 - 2 * l)) & 0x300));
      f.signs[g] = b[34 + g];
      break;
    case DType::IQ3_XXS: {
      const uint32_t w = lattice_word(b + 66 + 4 * run);
      f.codes[run] = uint8_t(2 * (w >> 28) + 1);
      f.indexes[g][0] = b[2 + 8 * run + 2 * l];
      f.indexes[g][1] = b[2 + 8 * run + 2 * l + 1];
      f.signs[g] = iq_signs((w >> (7 * l)) & 127);
      break;
    }
    case DType::IQ1_S: {
      const uint16_t h = lattice_half_word(b + 34 + 2 * run);
      f.codes[run] = uint8_t(2 * ((h >> 12) & 7) + 1);
      f.indexes[g][0] = uint16_t(b[2 + g] | (((h >> (3 * l)) & 7) << 8) | (h & 0x8000 ? 2048 : 0));
      break;
    }
    case DType::IQ1_M: {
      const uint16_t sc = lattice_half_word(b + 48 + 2 * (g / 8));
      f.codes[g / 2] = uint8_t(2 * ((sc >> (3 * ((g / 2) % 4))) & 7) + 1);
      const int top = (b[32 + g / 2] >> (4 * (g % 2))) & 0x0f;
      f.indexes[g][0] = uint16_t(b[g] | ((top & 7) << 8) | (top & 8 ? 2048 : 0));
      break;
    }
    default:  // IQ3_S
      f.codes[run] = uint8_t(1 + 2 * lattice_nibble(b + 106, run));
      f.indexes[g][0] = uint16_t(b[2 + 8 * run + 2 * l] | ((b[66 + run] << (8 - 2 * l)) & 256));
      f.indexes[g][1] = uint16_t(b[2 + 8 * run + 2 * l + 1] | ((b[66 + run] << (7 - 2 * l)) & 256));
      f.signs[g] = b[74 + g];
      break;
  }
}

inline LatticeFields lattice_fields(DType t, const uint8_t* b) {
  LatticeFields f;
  f.d = t == DType::IQ1_M ? iq1_m_scale_bits(b) : lattice_half_word(b);
  f.runs = t == DType::IQ2_XS || t == DType::IQ2_S || t == DType::IQ1_M ? 16 : 8;
  for (int g = 0; g < 32; ++g) read_lattice_group(t, b, g, f);
  return f;
}

}  // namespace
}  // namespace autoglm
