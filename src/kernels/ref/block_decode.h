// Dequantization of one block of each GGUF weight type: the reference semantics.
// Everything is in an unnamed namespace on purpose: kernels/cpu includes this header
// in translation units built for other ISAs, and each must keep its own copy.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/half.h"
#include "kernels/ref/iq_grids.h"
#include "kernels/ref/lattice_fields.h"
#include "kernels/ref/ternary_codes.h"

namespace autoglm {
namespace {

inline float read_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_float(h);
}

// Q4_0: fp16 d, 16 bytes of nibbles; low nibbles are elements 0..15, high 16..31.
inline void decode_q4_0(const uint8_t* b, float* y) {
  const float d = read_half(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = float((qs[j] & 0x0f) - 8) * d;
    y[j + 16] = float((qs[j] >> 4) - 8) * d;
  }
}

// Q4_1: fp16 d, fp16 m, nibbles; y = q*d + m.
inline void decode_q4_1(const uint8_t* b, float* y) {
  const float d = read_half(b), m = read_half(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = float(qs[j] & 0x0f) * d + m;
    y[j + 16] = float(qs[j] >> 4) * d + m;
  }
}

// Q5_0: fp16 d, 32 high bits, nibbles; y = (q5 - 16) * d.
inline void decode_q5_0(const uint8_t* b, float* y) {
  const float d = read_half(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int hi0 = ((qh >> j) << 4) & 0x10;
    const int hi1 = (qh >> (j + 12)) & 0x10;
    y[j] = float(((qs[j] & 0x0f) | hi0) - 16) * d;
    y[j + 16] = float(((qs[j] >> 4) | hi1) - 16) * d;
  }
}

// Q5_1: fp16 d, fp16 m, 32 high bits, nibbles; y = q5*d + m.
inline void decode_q5_1(const uint8_t* b, float* y) {
  const float d = read_half(b), m = read_half(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int hi0 = ((qh >> j) << 4) & 0x10;
    const int hi1 = (qh >> (j + 12)) & 0x10;
    y[j] = float((qs[j] & 0x0f) | hi0) * d + m;
    y[j + 16] = float((qs[j] >> 4) | hi1) * d + m;
  }
}

// Q8_0: fp16 d, 32 int8.
inline void decode_q8_0(const uint8_t* b, float* y) {
  const float d = read_half(b);
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = float(qs[j]) * d;
}

// MXFP4: the e2m1 values of the 16 codes, doubled so that they are integers (the kernels'
// int8 lookup table); the block's scale is halved to match.
constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128): half the E8M0 scale 2^(e - 127), exact (e < 2 gives a subnormal).
inline float e8m0_half_to_float(uint8_t e) {
  return e >= 2 ? bits_to_float(uint32_t(e - 1) << 23) : bits_to_float(0x00200000u << e);
}

// MXFP4: E8M0 exponent e, 16 bytes of e2m1 nibbles; low nibbles are elements 0..15, high 16..31.
inline void decode_mxfp4(const uint8_t* b, float* y) {
  const float d = e8m0_half_to_float(b[0]);
  const uint8_t* qs = b + 1;
  for (int j = 0; j < 16; ++j) {
    y[j] = float(kMxfp4Values[qs[j] & 0x0f]) * d;
    y[j + 16] = float(kMxfp4Values[qs[j] >> 4]) * d;
  }
}

// K-quants pack eight 6-bit (scale, min) pairs into 12 bytes.
inline void k_scale_min(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K: 256 elements; fp16 d, fp16 dmin, 12 scale bytes, 128 nibble bytes.
inline void decode_q4_k(const uint8_t* b, float* y) {
  const float d = read_half(b), dmin = read_half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0; j < 8; j += 2) {
    int sc, m;
    k_scale_min(j, scales, sc, m);
    const float d1 = d * float(sc), m1 = dmin * float(m);
    k_scale_min(j + 1, scales, sc, m);
    const float d2 = d * float(sc), m2 = dmin * float(m);
    for (int l = 0; l < 32; ++l) {
      y[l] = d1 * float(q[l] & 0x0f) - m1;
      y[l + 32] = d2 * float(q[l] >> 4) - m2;
    }
    y += 64;
    q += 32;
  }
}

// Q5_K: fp16 d, fp16 dmin, 12 scale bytes, 32 high-bit bytes, 128 nibble bytes.
inline void decode_q5_k(const uint8_t* b, float* y) {
  const float d = read_half(b), dmin = read_half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < 8; j += 2) {
    int sc, m;
    k_scale_min(j, scales, sc, m);
    const float d1 = d * float(sc), m1 = dmin * float(m);
    k_scale_min(j + 1, scales, sc, m);
    const float d2 = d * float(sc), m2 = dmin * float(m);
    for (int l = 0; l < 32; ++l) {
      y[l] = d1 * float((ql[l] & 0x0f) + ((qh[l] & u1) ? 16 : 0)) - m1;
      y[l + 32] = d2 * float((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    }
    y += 64;
    ql += 32;
    u1 <<= 2;
    u2 <<= 2;
  }
}

// Q6_K: 128 low-nibble bytes, 64 high-2-bit bytes, 16 int8 scales, fp16 d.
inline void decode_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = read_half(b + 208);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = int((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = int((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * float(sc[is]) * float(q1);
      y[l + 32] = d * float(sc[is + 2]) * float(q2);
      y[l + 64] = d * float(sc[is + 4]) * float(q3);
      y[l + 96] = d * float(sc[is + 6]) * float(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

// Q2_K: 256 elements; 16 scale bytes (low nibble scale, high nibble min), 64 bytes of 2-bit
// codes, fp16 d, fp16 dmin. Each 32-byte half of the codes holds 128 elements: bit pair s of
// byte l is element 32 s + l, in runs of 16 with a scale each.
inline void decode_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const float d = read_half(b + 80), dmin = read_half(b + 82);
  int is = 0;
  for (int half = 0; half < 2; ++half, q += 32)
    for (int shift = 0; shift < 8; shift += 2)
      for (int run = 0; run < 2; ++run, ++is, y += 16) {
        const float dl = d * float(scales[is] & 0x0f), ml = dmin * float(scales[is] >> 4);
        for (int l = 0; l < 16; ++l) y[l] = dl * float((q[16 * run + l] >> shift) & 3) - ml;
      }
}

// Q3_K's sixteen 6-bit scales from its 12 bytes: the low 4 bits of scale j in byte j % 8
// (low nibble for j < 8, high for the rest), the high 2 bits in bytes 8..11, bit pair j / 4 of
// byte 8 + j % 4. Stored with an offset of 32.
inline int q3_k_scale(const uint8_t* s, int j) {
  const int low = j < 8 ? s[j] & 0x0f : s[j - 8] >> 4;
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Q3_K: 32 bytes of high bits (a clear bit subtracts 4), 64 bytes of 2-bit codes laid out as
// Q2_K's, 12 scale bytes, fp16 d.
inline void decode_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* q = b + 32;
  const uint8_t* scales = b + 96;
  const float d = read_half(b + 108);
  int is = 0;
  uint8_t bit = 1;
  for (int half = 0; half < 2; ++half, q += 32)
    for (int shift = 0; shift < 8; shift += 2, bit = uint8_t(bit << 1))
      for (int run = 0; run < 2; ++run, ++is, y += 16) {
        const float dl = d * float(q3_k_scale(scales, is));
        for (int l = 0; l < 16; ++l) {
          const int i = 16 * run + l;
          y[l] = dl * float(((q[i] >> shift) & 3) - ((hmask[i] & bit) ? 0 : 4));
        }
      }
}

// IQ4_NL and IQ4_XS: 4-bit codes index this non-uniform codebook (the format's).
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// 16 bytes of codebook nibbles (low: elements 0..15, high: 16..31) times dl.
inline void decode_iq4_codes(const uint8_t* qs, float dl, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = dl * float(kIq4Values[qs[j] & 0x0f]);
    y[j + 16] = dl * float(kIq4Values[qs[j] >> 4]);
  }
}

// IQ4_NL: fp16 d, 16 bytes of codebook nibbles.
inline void decode_iq4_nl(const uint8_t* b, float* y) {
  decode_iq4_codes(b + 2, read_half(b), y);
}

// IQ4_XS: 256 elements; fp16 d, the 6-bit scales of its 8 runs of 32 (high 2 bits in a 16-bit
// word, low 4 in 4 bytes of nibbles; offset 32), 128 bytes of codebook nibbles.
inline void decode_iq4_xs(const uint8_t* b, float* y) {
  const float d = read_half(b);
  uint16_t high;
  std::memcpy(&high, b + 2, 2);
  const uint8_t* low = b + 4;
  const uint8_t* qs = b + 8;
  for (int run = 0; run < 8; ++run) {
    const int ls = ((low[run / 2] >> (4 * (run % 2))) & 0x0f) | (((high >> (2 * run)) & 3) << 4);
    decode_iq4_codes(qs + 16 * run, d * float(ls - 32), y + 32 * run);
  }
}

// TQ2_0 and TQ1_0: codes 0, 1, 2 (ternary_codes.h has the layouts) for -1, 0, 1 times fp16 d.
inline void decode_ternary(const uint8_t* codes, float d, float* y) {
  for (int e = 0; e < 256; ++e) y[e] = float(int(codes[e]) - 1) * d;
}

inline void decode_tq2_0(const uint8_t* b, float* y) {
  uint8_t codes[256];
  ref::tq2_0_codes(b, codes);
  decode_ternary(codes, read_half(b + ref::kTq2ScaleOffset), y);
}

inline void decode_tq1_0(const uint8_t* b, float* y) {
  uint8_t codes[256];
  ref::tq1_0_codes(b, codes);
  decode_ternary(codes, read_half(b + ref::kTq1ScaleOffset), y);
}

// The IQ1/IQ2/IQ3 types (lattice_fields.h reads their blocks): each group of 8 values is one
// entry of a lattice grid (iq_grids.h: one value per byte, little-endian), or two of 4, with a
// sign per value; each run's scale is d times its odd code times the type's factor.

inline float grid_value(uint64_t entry, int j) {
  return float(uint8_t(entry >> (8 * j)));
}

// y[j] = dl * value j of the entry, negated where bit `first + j` of signs is set.
inline void put_signed(uint64_t entry, int n, uint8_t signs, int first, float dl, float* y) {
  for (int j = 0; j < n; ++j) y[j] = dl * grid_value(entry, j) * ((signs >> (first + j)) & 1 ? -1.0f : 1.0f);
}

// The types whose grid entries hold 8 values (IQ2_XXS: d (0.5 + s) / 4 = d (2 s + 1) / 8, and so on).
inline void decode_lattice8(DType t, const uint64_t* grid, float factor, const uint8_t* b, float* y) {
  const LatticeFields f = lattice_fields(t, b);
  const float d = fp16_to_float(f.d);
  for (int g = 0; g < 32; ++g, y += 8)
    put_signed(grid[f.indexes[g][0]], 8, f.signs[g], 0, d * float(f.code_of_group(g)) * factor, y);
}

// The types whose grid entries hold 4 values, two a group.
inline void decode_lattice4(DType t, const uint32_t* grid, float factor, const uint8_t* b, float* y) {
  const LatticeFields f = lattice_fields(t, b);
  const float d = fp16_to_float(f.d);
  for (int g = 0; g < 32; ++g, y += 8) {
    const float dl = d * float(f.code_of_group(g)) * factor;
    put_signed(grid[f.indexes[g][0]], 4, f.signs[g], 0, dl, y);
    put_signed(grid[f.indexes[g][1]], 4, f.signs[g], 4, dl, y + 4);
  }
}

constexpr float kIq1Delta = 0.125f;  // IQ1's shift of a group's grid values, + or -

// IQ1: y[j] = d (2 s + 1) (value j + delta), the grid holding -1, 0, 1 as int8.
inline void decode_iq1(DType t, const uint8_t* b, float* y) {
  const LatticeFields f = lattice_fields(t, b);
  const float d = fp16_to_float(f.d);
  for (int g = 0; g < 32; ++g, y += 8) {
    const uint64_t entry = iq_grids::kIq1SGrid[f.indexes[g][0] & 2047];
    const float dl = d * float(f.code_of_group(g)), delta = f.indexes[g][0] & 2048 ? -kIq1Delta : kIq1Delta;
    for (int j = 0; j < 8; ++j) y[j] = dl * (float(int8_t(uint8_t(entry >> (8 * j)))) + delta);
  }
}

inline void decode_iq2_xxs(const uint8_t* b, float* y) {
  decode_lattice8(DType::IQ2_XXS, iq_grids::kIq2XxsGrid, 0.125f, b, y);
}
inline void decode_iq2_xs(const uint8_t* b, float* y) {
  decode_lattice8(DType::IQ2_XS, iq_grids::kIq2XsGrid, 0.125f, b, y);
}
inline void decode_iq2_s(const uint8_t* b, float* y) {
  decode_lattice8(DType::IQ2_S, iq_grids::kIq2SGrid, 0.125f, b, y);
}
inline void decode_iq3_xxs(const uint8_t* b, float* y) {
  decode_lattice4(DType::IQ3_XXS, iq_grids::kIq3XxsGrid, 0.25f, b, y);
}
inline void decode_iq3_s(const uint8_t* b, float* y) {
  decode_lattice4(DType::IQ3_S, iq_grids::kIq3SGrid, 1.0f, b, y);
}
inline void decode_iq1_s(const uint8_t* b, float* y) {
  decode_iq1(DType::IQ1_S, b, y);
}
inline void decode_iq1_m(const uint8_t* b, float* y) {
  decode_iq1(DType::IQ1_M, b, y);
}

using BlockDecoder = void (*)(const uint8_t*, float*);

// The block decoder of a quantized type, or nullptr for plain and unsupported types.
inline BlockDecoder block_decoder(DType t) {
  switch (t) {
    case DType::Q4_0: return decode_q4_0;
    case DType::Q4_1: return decode_q4_1;
    case DType::Q5_0: return decode_q5_0;
    case DType::Q5_1: return decode_q5_1;
    case DType::Q8_0: return decode_q8_0;
    case DType::Q4_K: return decode_q4_k;
    case DType::Q5_K: return decode_q5_k;
    case DType::Q6_K: return decode_q6_k;
    case DType::MXFP4: return decode_mxfp4;
    case DType::Q2_K: return decode_q2_k;
    case DType::Q3_K: return decode_q3_k;
    case DType::IQ4_NL: return decode_iq4_nl;
    case DType::IQ4_XS: return decode_iq4_xs;
    case DType::TQ1_0: return decode_tq1_0;
    case DType::TQ2_0: return decode_tq2_0;
    case DType::IQ2_XXS: return decode_iq2_xxs;
    case DType::IQ2_XS: return decode_iq2_xs;
    case DType::IQ2_S: return decode_iq2_s;
    case DType::IQ3_XXS: return decode_iq3_xxs;
    case DType::IQ3_S: return decode_iq3_s;
    case DType::IQ1_S: return decode_iq1_s;
    case DType::IQ1_M: return decode_iq1_m;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace autoglm
