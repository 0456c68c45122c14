// Encoders of Q2_K, Q3_K, IQ4_NL, IQ4_XS, TQ1_0 and TQ2_0, the inverses of block_decode.h's
// layouts: each run gets a weighted least-squares scale (fit.h), the runs' scales are rounded to
// the type's scale bits against one fp16 block scale, and the codes are chosen against the
// scales as they will decode.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/ref/block_decode.h"
#include "kernels/ref/encoders.h"
#include "kernels/ref/fit.h"
#include "kernels/ref/ternary_codes.h"

namespace autoglm::ref {
namespace {

int nearest(float v) {
  return int(std::lround(v));
}

// Runs of 16 (Q2_K, Q3_K) laid out as block_decode.h's Q2_K: element 128 h + 32 s + 16 r + l is
// bit pair s of byte 32 h + 16 r + l.
void pack_two_bit_runs(const int* q, uint8_t* bytes) {
  std::memset(bytes, 0, 64);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, s = (e / 32) % 4, i = e % 32;
    bytes[32 * h + i] |= uint8_t((q[e] & 3) << (2 * s));
  }
}

// Q2_K: sixteen runs of 16, y = d * sc * q - dmin * m with 4-bit sc and m, 2-bit q.
void encode_q2_k(const float* x, const float* w, uint8_t* b) {
  float scale[16], minv[16];
  for (int s = 0; s < 16; ++s) fit_affine(x + 16 * s, w + 16 * s, 16, 3, &scale[s], &minv[s]);
  write_half(b + 80, *std::max_element(scale, scale + 16) / 15.0f);
  write_half(b + 82, *std::max_element(minv, minv + 16) / 15.0f);
  const float d = read_half(b + 80), dmin = read_half(b + 82);
  int q[256];
  for (int s = 0; s < 16; ++s) {
    const int sc = d ? std::clamp(nearest(scale[s] / d), 0, 15) : 0;
    const int mn = dmin ? std::clamp(nearest(minv[s] / dmin), 0, 15) : 0;
    b[s] = uint8_t(sc | (mn << 4));
    const float step = d * float(sc), offset = dmin * float(mn);
    for (int i = 0; i < 16; ++i) q[16 * s + i] = step ? std::clamp(nearest((x[16 * s + i] + offset) / step), 0, 3) : 0;
  }
  pack_two_bit_runs(q, b + 16);
}

// Q3_K: sixteen runs of 16, y = d * sc * v with 6-bit signed sc and v in [-4, 3]: two low bits
// with Q2_K's layout and a high bit (set for v >= 0) per element in 32 mask bytes.
void encode_q3_k(const float* x, const float* w, uint8_t* b) {
  float scale[16];
  for (int s = 0; s < 16; ++s) scale[s] = fit_symmetric(x + 16 * s, w + 16 * s, 16, 4);
  write_half(b + 108, signed_absmax(scale, 16) / -32.0f);
  const float d = read_half(b + 108);
  uint8_t* scales = b + 96;
  std::memset(scales, 0, 12);
  int q[256];
  for (int s = 0; s < 16; ++s) {
    const int sc = d ? std::clamp(nearest(scale[s] / d), -32, 31) : 0;
    const int stored = sc + 32;
    scales[s % 8] |= uint8_t((stored & 0x0f) << (s < 8 ? 0 : 4));
    scales[8 + s % 4] |= uint8_t((stored >> 4) << (2 * (s / 4)));
    const float step = d * float(sc);
    for (int i = 0; i < 16; ++i) q[16 * s + i] = (step ? std::clamp(nearest(x[16 * s + i] / step), -4, 3) : 0) + 4;
  }
  uint8_t* hmask = b;
  std::memset(hmask, 0, 32);
  for (int e = 0; e < 256; ++e)
    if (q[e] >= 4) hmask[e % 32] |= uint8_t(1 << (e / 32));
  pack_two_bit_runs(q, b + 32);
}

const signed char* iq4_book() {
  return reinterpret_cast<const signed char*>(kIq4Values);
}

// 32 values as codebook nibbles at scale dl (low nibbles elements 0..15, high 16..31).
void put_iq4_codes(const float* x, float dl, uint8_t* qs) {
  int q[32];
  for (int i = 0; i < 32; ++i) q[i] = dl ? nearest_code(iq4_book(), x[i] / dl) : nearest_code(iq4_book(), 0.0f);
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t(q[j] | (q[j + 16] << 4));
}

void encode_iq4_nl(const float* x, const float* w, uint8_t* b) {
  write_half(b, fit_codebook(x, w, 32, iq4_book()));
  put_iq4_codes(x, read_half(b), b + 2);
}

// IQ4_XS: eight runs of 32 with 6-bit signed scales (stored + 32) against one fp16 d.
void encode_iq4_xs(const float* x, const float* w, uint8_t* b) {
  float scale[8];
  for (int r = 0; r < 8; ++r) scale[r] = fit_codebook(x + 32 * r, w + 32 * r, 32, iq4_book());
  write_half(b, signed_absmax(scale, 8) / -32.0f);
  const float d = read_half(b);
  uint16_t high = 0;
  uint8_t* low = b + 4;
  std::memset(low, 0, 4);
  for (int r = 0; r < 8; ++r) {
    const int sc = d ? std::clamp(nearest(scale[r] / d), -32, 31) : 0;
    const int stored = sc + 32;
    low[r / 2] |= uint8_t((stored & 0x0f) << (4 * (r % 2)));
    high = uint16_t(high | ((stored >> 4) << (2 * r)));
    put_iq4_codes(x + 32 * r, d * float(sc), b + 8 + 16 * r);
  }
  std::memcpy(b + 2, &high, 2);
}

// Ternary codes (-1, 0, 1) + 1 at scale d = the largest magnitude: ternary weights come back
// exactly, which is what these types are for.
float ternary_codes(const float* x, int* t) {
  float amax = 0;
  for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[i]));
  for (int i = 0; i < 256; ++i) t[i] = amax ? std::clamp(nearest(x[i] / amax), -1, 1) + 1 : 1;
  return amax;
}

void encode_tq2_0(const float* x, const float*, uint8_t* b) {
  int t[256];
  write_half(b + 64, ternary_codes(x, t));
  uint8_t codes[256];
  for (int e = 0; e < 256; ++e) codes[e] = uint8_t(t[e]);
  tq2_0_pack(codes, b);
}

// Digits (most significant first) as the byte whose fixed-point fraction of 3^5 they are: the
// smallest q with q / 256 >= v / 243, which the decoder's digit extraction reads back.
uint8_t pack_ternary_digits(const int* digits, int count, int stride) {
  int v = 0;
  for (int n = 0; n < 5; ++n) v = 3 * v + (n < count ? digits[n * stride] : 0);
  return uint8_t((v * 256 + 242) / 243);
}

void encode_tq1_0(const float* x, const float*, uint8_t* b) {
  int t[256];
  write_half(b + 52, ternary_codes(x, t));
  for (int m = 0; m < 32; ++m) b[m] = pack_ternary_digits(t + m, 5, 32);
  for (int m = 0; m < 16; ++m) b[32 + m] = pack_ternary_digits(t + 160 + m, 5, 16);
  for (int m = 0; m < 4; ++m) b[48 + m] = pack_ternary_digits(t + 240 + m, 4, 4);
}

}  // namespace

BlockEncoder low_bit_encoder(DType t) {
  switch (t) {
    case DType::Q2_K: return encode_q2_k;
    case DType::Q3_K: return encode_q3_k;
    case DType::IQ4_NL: return encode_iq4_nl;
    case DType::IQ4_XS: return encode_iq4_xs;
    case DType::TQ1_0: return encode_tq1_0;
    case DType::TQ2_0: return encode_tq2_0;
    default: return nullptr;
  }
}

}  // namespace autoglm::ref
