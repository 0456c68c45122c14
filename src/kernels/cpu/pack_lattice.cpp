// The lattice types' file blocks (block_decode.h has their layouts) into lattice_format.h's layout.
#include <cstring>

#include "kernels/cpu/lattice_format.h"
#include "kernels/cpu/packed.h"
#include "kernels/ref/block_decode.h"

namespace autoglm::cpu {
namespace {

// One row's super-block, field by field.
struct LatticeFields {
  uint16_t d = 0;
  uint8_t codes[16] = {};        // per scale run: 2 s + 1 (IQ3_S: 1 + 2 s)
  uint16_t indexes[32][2] = {};  // per group of 8
  uint8_t signs[32] = {};
};

uint32_t word_at(const uint8_t* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

uint16_t half_word_at(const uint8_t* p) {
  uint16_t w;
  std::memcpy(&w, p, 2);
  return w;
}

// Two 4-bit scales a byte, the low nibble first.
uint8_t nibble(const uint8_t* bytes, int i) {
  return uint8_t(i % 2 ? bytes[i / 2] >> 4 : bytes[i / 2] & 0x0f);
}

// IQ1_M keeps its fp16 d in the top nibbles of its four scale words.
uint16_t iq1_m_scale_bits(const uint8_t* b) {
  uint16_t bits = 0;
  for (int k = 0; k < 4; ++k) bits = uint16_t(bits | ((half_word_at(b + 48 + 2 * k) >> 12) << (4 * k)));
  return bits;
}

LatticeFields fields(DType t, const uint8_t* b) {
  LatticeFields f;
  f.d = t == DType::IQ1_M ? iq1_m_scale_bits(b) : half_word_at(b);
  for (int run = 0; run < 8; ++run)
    for (int l = 0; l < 4; ++l) {
      const int g = 4 * run + l;
      switch (t) {
        case DType::IQ2_XXS: {
          const uint32_t w0 = word_at(b + 2 + 8 * run), w1 = word_at(b + 6 + 8 * run);
          f.codes[run] = uint8_t(2 * (w1 >> 28) + 1);
          f.indexes[g][0] = uint16_t((w0 >> (8 * l)) & 0xff);
          f.signs[g] = iq_signs((w1 >> (7 * l)) & 127);
          break;
        }
        case DType::IQ2_XS: {
          const uint16_t q = half_word_at(b + 2 + 2 * g);
          f.codes[g / 2] = uint8_t(2 * nibble(b + 66, g / 2) + 1);
          f.indexes[g][0] = q & 511;
          f.signs[g] = iq_signs(q >> 9);
          break;
        }
        case DType::IQ2_S:
          f.codes[g / 2] = uint8_t(2 * nibble(b + 74, g / 2) + 1);
          f.indexes[g][0] = uint16_t(b[2 + g] | ((b[66 + run] << (8 - 2 * l)) & 0x300));
          f.signs[g] = b[34 + g];
          break;
        case DType::IQ3_XXS: {
          const uint32_t w = word_at(b + 66 + 4 * run);
          f.codes[run] = uint8_t(2 * (w >> 28) + 1);
          f.indexes[g][0] = b[2 + 8 * run + 2 * l];
          f.indexes[g][1] = b[2 + 8 * run + 2 * l + 1];
          f.signs[g] = iq_signs((w >> (7 * l)) & 127);
          break;
        }
        case DType::IQ1_S: {
          const uint16_t h = half_word_at(b + 34 + 2 * run);
          f.codes[run] = uint8_t(2 * ((h >> 12) & 7) + 1);
          f.indexes[g][0] = uint16_t(b[2 + g] | (((h >> (3 * l)) & 7) << 8) | (h & 0x8000 ? 2048 : 0));
          break;
        }
        case DType::IQ1_M: {
          const uint16_t sc = half_word_at(b + 48 + 2 * (g / 8));
          f.codes[g / 2] = uint8_t(2 * ((sc >> (3 * ((g / 2) % 4))) & 7) + 1);
          const int nibble = (b[32 + g / 2] >> (4 * (g % 2))) & 0x0f;
          f.indexes[g][0] = uint16_t(b[g] | ((nibble & 7) << 8) | (nibble & 8 ? 2048 : 0));
          break;
        }
        default:  // IQ3_S
          f.codes[run] = uint8_t(1 + 2 * nibble(b + 106, run));
          f.indexes[g][0] = uint16_t(b[2 + 8 * run + 2 * l] | ((b[66 + run] << (8 - 2 * l)) & 256));
          f.indexes[g][1] = uint16_t(b[2 + 8 * run + 2 * l + 1] | ((b[66 + run] << (7 - 2 * l)) & 256));
          f.signs[g] = b[74 + g];
          break;
      }
    }
  return f;
}

}  // namespace

void pack_lattice(DType t, const uint8_t* const* src, uint8_t* out) {
  const LatticeFormat lf = lattice_format(t);
  const int per_group = lf.indexes_per_group();
  for (int r = 0; r < kPackRows; ++r) {
    if (!src[r]) continue;
    const LatticeFields f = fields(t, src[r]);
    std::memcpy(out + 2 * r, &f.d, 2);
    for (int run = 0; run < lf.scale_runs; ++run) out[lf.scales_offset() + 8 * run + r] = f.codes[run];
    for (int g = 0; g < 32; ++g) {
      for (int k = 0; k < per_group; ++k)
        std::memcpy(out + lf.indexes_offset() + (int64_t(8 * g + r) * per_group + k) * lf.index_bytes, &f.indexes[g][k],
                    size_t(lf.index_bytes));  // little-endian: the low byte first
      if (!lf.signed_entries) out[lf.signs_offset() + 8 * g + r] = f.signs[g];
    }
  }
}

}  // namespace autoglm::cpu
