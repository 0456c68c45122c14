#include "kernels/ref/quants.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/half.h"
#include "kernels/ref/block_decode.h"
#include "kernels/ref/encoders.h"
#include "kernels/ref/fit.h"

namespace autoglm::ref {

void write_half(uint8_t* p, float v) {
  const uint16_t h = float_to_fp16(v);
  std::memcpy(p, &h, 2);
}

namespace {

int nearest(float v) {
  return int(std::lround(v));
}

void encode_q8_0(const float* x, const float*, uint8_t* b) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  write_half(b, d);
  const float id = d ? 1.0f / d : 0.0f;
  for (int i = 0; i < 32; ++i) reinterpret_cast<int8_t*>(b + 2)[i] = int8_t(std::clamp(nearest(x[i] * id), -127, 127));
}

// Shared by Q4_0 (bits 4) and Q5_0 (bits 5): d = max / -2^(bits-1).
void encode_symmetric(const float* x, int bits, float* d_out, int* q) {
  const int half = 1 << (bits - 1);
  const float d = signed_absmax(x, 32) / float(-half);
  const float id = d ? 1.0f / d : 0.0f;
  for (int i = 0; i < 32; ++i) q[i] = std::clamp(nearest(x[i] * id) + half, 0, 2 * half - 1);
  *d_out = d;
}

// Shared by Q4_1 and Q5_1: y = q*d + min.
void encode_affine(const float* x, int bits, float* d_out, float* m_out, int* q) {
  const float lo = *std::min_element(x, x + 32), hi = *std::max_element(x, x + 32);
  const int levels = (1 << bits) - 1;
  const float d = (hi - lo) / float(levels);
  const float id = d ? 1.0f / d : 0.0f;
  for (int i = 0; i < 32; ++i) q[i] = std::clamp(nearest((x[i] - lo) * id), 0, levels);
  *d_out = d;
  *m_out = lo;
}

void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
}

uint32_t fifth_bits(const int* q) {
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= uint32_t((q[j] >> 4) & 1) << j;
  return qh;
}

// With importance weights: the weighted least-squares scale (fit.h), codes against it as stored.
void encode_symmetric_weighted(const float* x, const float* w, int bits, float* d_out, int* q) {
  const int half = 1 << (bits - 1);
  const float d = fp16_to_float(float_to_fp16(fit_symmetric(x, w, 32, half)));
  const float id = d ? 1.0f / d : 0.0f;
  for (int i = 0; i < 32; ++i) q[i] = std::clamp(nearest(x[i] * id) + half, 0, 2 * half - 1);
  *d_out = d;
}

void write_q4_0(float d, const int* q, uint8_t* b) {
  write_half(b, d);
  pack_nibbles(q, b + 2);
}

void write_q5_0(float d, const int* q, uint8_t* b) {
  write_half(b, d);
  const uint32_t qh = fifth_bits(q);
  std::memcpy(b + 2, &qh, 4);
  pack_nibbles(q, b + 6);
}

// Without importance, the absmax scale (llama.cpp's files byte for byte); with it, the fit.
template <int kBits, bool kWeighted>
void encode_q_0(const float* x, const float* w, uint8_t* b) {
  float d;
  int q[32];
  if constexpr (kWeighted)
    encode_symmetric_weighted(x, w, kBits, &d, q);
  else
    encode_symmetric(x, kBits, &d, q);
  (kBits == 4 ? write_q4_0 : write_q5_0)(d, q, b);
}

void encode_q4_1(const float* x, const float*, uint8_t* b) {
  float d, m;
  int q[32];
  encode_affine(x, 4, &d, &m, q);
  write_half(b, d);
  write_half(b + 2, m);
  pack_nibbles(q, b + 4);
}

void encode_q5_1(const float* x, const float*, uint8_t* b) {
  float d, m;
  int q[32];
  encode_affine(x, 5, &d, &m, q);
  write_half(b, d);
  write_half(b + 2, m);
  const uint32_t qh = fifth_bits(q);
  std::memcpy(b + 4, &qh, 4);
  pack_nibbles(q, b + 8);
}

// Q4_K / Q5_K: eight sub-blocks of 32 with 6-bit scales and mins; y = d*sc*q - dmin*m.
// Fills the header (d, dmin, 12 scale bytes) and returns each element's code in q.
void encode_k_affine(const float* x, const float* w, int levels, uint8_t* b, int* q) {
  float scale[8], minv[8];
  for (int s = 0; s < 8; ++s) fit_affine(x + 32 * s, w + 32 * s, 32, levels, &scale[s], &minv[s]);
  const float max_scale = *std::max_element(scale, scale + 8), max_min = *std::max_element(minv, minv + 8);
  const float d = max_scale / 63.0f, dmin = max_min / 63.0f;
  write_half(b, d);
  write_half(b + 2, dmin);
  // Use the scales as they will be decoded (after fp16 rounding).
  const float dd = read_half(b), dm = read_half(b + 2);
  int sc[8], mn[8];
  for (int s = 0; s < 8; ++s) {
    sc[s] = dd ? std::clamp(nearest(scale[s] / dd), 0, 63) : 0;
    mn[s] = dm ? std::clamp(nearest(minv[s] / dm), 0, 63) : 0;
  }
  uint8_t* scales = b + 4;
  for (int j = 0; j < 4; ++j) {
    scales[j] = uint8_t((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    scales[j + 4] = uint8_t((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    scales[j + 8] = uint8_t((sc[j + 4] & 0x0f) | ((mn[j + 4] & 0x0f) << 4));
  }
  for (int s = 0; s < 8; ++s) {
    const float step = dd * float(sc[s]), offset = dm * float(mn[s]);
    for (int i = 0; i < 32; ++i) {
      const int v = step ? nearest((x[32 * s + i] + offset) / step) : 0;
      q[32 * s + i] = std::clamp(v, 0, levels);
    }
  }
}

void encode_q4_k(const float* x, const float* w, uint8_t* b) {
  int q[256];
  encode_k_affine(x, w, 15, b, q);
  uint8_t* qs = b + 16;
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) qs[32 * c + l] = uint8_t(q[64 * c + l] | (q[64 * c + l + 32] << 4));
}

void encode_q5_k(const float* x, const float* w, uint8_t* b) {
  int q[256];
  encode_k_affine(x, w, 31, b, q);
  uint8_t* qh = b + 16;
  uint8_t* ql = b + 48;
  std::memset(qh, 0, 32);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const int lo = q[64 * c + l], hi = q[64 * c + l + 32];
      ql[32 * c + l] = uint8_t((lo & 0x0f) | ((hi & 0x0f) << 4));
      qh[l] |= uint8_t(((lo >> 4) & 1) << (2 * c));
      qh[l] |= uint8_t(((hi >> 4) & 1) << (2 * c + 1));
    }
}

// Q6_K: sixteen sub-blocks of 16 with int8 scales; y = d*sc*(q-32).
void encode_q6_k(const float* x, const float* w, uint8_t* b) {
  float sub_scale[16];
  float max_scale = 0;
  for (int s = 0; s < 16; ++s) {
    sub_scale[s] = fit_symmetric(x + 16 * s, w + 16 * s, 16, 32);
    if (std::fabs(sub_scale[s]) > std::fabs(max_scale)) max_scale = sub_scale[s];
  }
  const float d = max_scale / -128.0f;
  write_half(b + 208, d);
  const float dd = read_half(b + 208);
  int8_t* sc = reinterpret_cast<int8_t*>(b + 192);
  int q[256];
  for (int s = 0; s < 16; ++s) {
    sc[s] = int8_t(dd ? std::clamp(nearest(sub_scale[s] / dd), -128, 127) : 0);
    const float step = dd * float(sc[s]);
    for (int i = 0; i < 16; ++i) {
      const int v = step ? nearest(x[16 * s + i] / step) : 0;
      q[16 * s + i] = std::clamp(v, -32, 31) + 32;
    }
  }
  uint8_t* ql = b;
  uint8_t* qh = b + 128;
  for (int n = 0; n < 2; ++n) {
    const int* qq = q + 128 * n;
    for (int l = 0; l < 32; ++l) {
      const int q1 = qq[l], q2 = qq[l + 32], q3 = qq[l + 64], q4 = qq[l + 96];
      ql[64 * n + l] = uint8_t((q1 & 0x0f) | ((q3 & 0x0f) << 4));
      ql[64 * n + l + 32] = uint8_t((q2 & 0x0f) | ((q4 & 0x0f) << 4));
      qh[32 * n + l] = uint8_t((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  }
}

// The MXFP4 code whose value (in units of d) is nearest x; ties go to the first code, the
// smaller magnitude, as llama.cpp's quantizer does.
int nearest_mxfp4_code(float x, float d) {
  int best = 0;
  float best_err = std::fabs(x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(float(kMxfp4Values[i]) * d - x);
    if (err < best_err) best = i, best_err = err;
  }
  return best;
}

// MXFP4: the exponent llama.cpp picks, floor(log2(amax)) - 2 (largest value 1.5 * 2^floor(log2 amax),
// so the top of the range is clipped), that its files and error bounds come with.
void encode_mxfp4(const float* x, const float*, uint8_t* b) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const int e = amax > 0 ? std::clamp(int(std::floor(std::log2(amax))) - 2 + 127, 0, 254) : 0;
  b[0] = uint8_t(e);
  const float d = e8m0_half_to_float(b[0]);
  int q[32];
  for (int i = 0; i < 32; ++i) q[i] = nearest_mxfp4_code(x[i], d);
  pack_nibbles(q, b + 1);
}

BlockEncoder block_encoder(DType t) {
  switch (t) {
    case DType::Q4_0: return encode_q_0<4, false>;
    case DType::Q4_1: return encode_q4_1;
    case DType::Q5_0: return encode_q_0<5, false>;
    case DType::Q5_1: return encode_q5_1;
    case DType::Q8_0: return encode_q8_0;
    case DType::Q4_K: return encode_q4_k;
    case DType::Q5_K: return encode_q5_k;
    case DType::Q6_K: return encode_q6_k;
    case DType::MXFP4: return encode_mxfp4;
    default: {
      const BlockEncoder low_bit = low_bit_encoder(t);
      return low_bit ? low_bit : lattice_encoder(t);
    }
  }
}

// The encoder that uses importance weights: Q4_0 and Q5_0 fit their scale then; the others
// always weigh (uniformly without an importance matrix) or, for Q4_1, Q5_1, Q8_0 and MXFP4, never.
BlockEncoder weighted_encoder(DType t) {
  if (t == DType::Q4_0) return encode_q_0<4, true>;
  if (t == DType::Q5_0) return encode_q_0<5, true>;
  return block_encoder(t);
}

}  // namespace

bool dtype_is_supported(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || block_decoder(t) != nullptr;
}

bool dtype_can_quantize(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || block_encoder(t) != nullptr;
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = read_half(bytes + 2 * i);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, bytes + 2 * i, 2);
        dst[i] = bf16_to_float(v);
      }
      return;
    default: break;
  }
  const BlockDecoder decode = block_decoder(t);
  AUTOGLM_CHECK(decode != nullptr);
  const auto& info = dtype_info(t);
  for (int64_t b = 0; b < n / info.block_elems; ++b) decode(bytes + b * info.block_bytes, dst + b * info.block_elems);
}

void quantize_row(DType t, const float* src, void* dst, int64_t n, const float* importance) {
  auto* bytes = static_cast<uint8_t*>(dst);
  switch (t) {
    case DType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    case DType::F16:
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t v = t == DType::F16 ? float_to_fp16(src[i]) : float_to_bf16(src[i]);
        std::memcpy(bytes + 2 * i, &v, 2);
      }
      return;
    default: break;
  }
  const BlockEncoder encode = importance ? weighted_encoder(t) : block_encoder(t);
  AUTOGLM_CHECK(encode != nullptr);
  const auto& info = dtype_info(t);
  static const std::vector<float> kEqualWeights(256, 1.0f);  // the largest block
  for (int64_t b = 0; b < n / info.block_elems; ++b) {
    const float* w = importance ? importance + b * info.block_elems : kEqualWeights.data();
    encode(src + b * info.block_elems, w, bytes + b * info.block_bytes);
  }
}

int64_t first_nonfinite_block(DType t, const void* src, int64_t n) {
  const int64_t block = dtype_info(t).block_elems, block_bytes = dtype_info(t).block_bytes;
  std::vector<float> values(static_cast<size_t>(block));
  for (int64_t b = 0; b < n / block; ++b) {
    dequantize_row(t, static_cast<const uint8_t*>(src) + b * block_bytes, values.data(), block);
    for (float v : values)
      if (!std::isfinite(v)) return b;
  }
  return -1;
}

double dot(DType t, const void* row, const float* x, int64_t n) {
  std::vector<float> w(static_cast<size_t>(n));
  dequantize_row(t, row, w.data(), n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(w[i]) * double(x[i]);
  return sum;
}

}  // namespace autoglm::ref
