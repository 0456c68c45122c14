#include "kernels/ref/q8_activations.h"

#include <algorithm>
#include <cmath>

namespace autoglm::ref {

namespace {

// Codes of n values on a symmetric int8 grid; returns the scale.
float quantize_block(const float* x, int n, int8_t* q) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d > 0 ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; ++i) q[i] = int8_t(std::clamp(std::nearbyint(x[i] * id), -127.0f, 127.0f));
  return d;
}

int32_t sum_codes(const int8_t* q, int n) {
  int32_t sum = 0;
  for (int i = 0; i < n; ++i) sum += q[i];
  return sum;
}

}  // namespace

void quantize_activations_q8(const float* x, int64_t n, Q8Block* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    out[b].d = quantize_block(x + 32 * b, 32, out[b].q);
    out[b].sum = sum_codes(out[b].q, 32);
  }
}

void quantize_activations_q8k(const float* x, int64_t n, Q8KBlock* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    out[b].d = quantize_block(x + 256 * b, 256, out[b].q);
    for (int s = 0; s < 8; ++s) out[b].bsum[s] = int16_t(sum_codes(out[b].q + 32 * s, 32));
    for (int s = 0; s < 16; ++s) out[b].bsum16[s] = int16_t(sum_codes(out[b].q + 16 * s, 16));
  }
}

void dequantize_activations_q8k(const Q8KBlock* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 256; ++b)
    for (int i = 0; i < 256; ++i) out[256 * b + i] = blocks[b].d * float(blocks[b].q[i]);
}

void dequantize_activations_q8(const Q8Block* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 32; ++b)
    for (int i = 0; i < 32; ++i) out[32 * b + i] = blocks[b].d * float(blocks[b].q[i]);
}

}  // namespace autoglm::ref
