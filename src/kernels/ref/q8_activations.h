// Activations quantized on the fly to int8 blocks of 32 with a float scale, so that
// quantized weights are multiplied with integer dot products (as the reference does).
#pragma once

#include <cstdint>

namespace autoglm {

struct Q8Block {
  float d;      // scale: x ~= d * q
  int32_t sum;  // sum(q): the integer kernels take a centred format's offset off with it
  int8_t q[32];

  // d * sum(q): what a weight format's min (Q4_1, Q5_1) multiplies.
  float sum_d() const { return d * float(sum); }
};

// Activations for the 256-element K-quant formats: one scale per 256 values and the
// sums of the codes of each 32-value (Q4_K's mins multiply them) and 16-value (Q6_K's
// offset of 32) sub-block.
struct Q8KBlock {
  float d;
  int16_t bsum[8];
  int16_t bsum16[16];
  int8_t q[256];
};

namespace ref {

// n must be a multiple of 32; out holds n / 32 blocks. Round to nearest even.
void quantize_activations_q8(const float* x, int64_t n, Q8Block* out);

// The values a block stands for (tests compare kernels against this).
void dequantize_activations_q8(const Q8Block* blocks, int64_t n, float* out);

// n a multiple of 256; out holds n / 256 blocks.
void quantize_activations_q8k(const float* x, int64_t n, Q8KBlock* out);
void dequantize_activations_q8k(const Q8KBlock* blocks, int64_t n, float* out);

}  // namespace ref
}  // namespace autoglm
