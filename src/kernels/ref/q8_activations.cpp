#include "kernels/ref/q8_activations.h"

#include <algorithm>
#include <cmath>

namespace autoglm::ref {

void quantize_activations_q8(const float* x, int64_t n, Q8Block* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = d > 0 ? 1.0f / d : 0.0f;
    out[b].d = d;
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) {
      out[b].q[i] = int8_t(std::clamp(std::nearbyint(xb[i] * id), -127.0f, 127.0f));
      sum += out[b].q[i];
    }
    out[b].sum_d = d * float(sum);
  }
}

void dequantize_activations_q8(const Q8Block* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 32; ++b)
    for (int i = 0; i < 32; ++i) out[32 * b + i] = blocks[b].d * float(blocks[b].q[i]);
}

}  // namespace autoglm::ref
