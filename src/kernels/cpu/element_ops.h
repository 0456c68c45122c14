// Element-wise kernels of the active ISA that the forward pass calls outside the matmuls.
#pragma once

#include <cstdint>

#include "kernels/ref/q8_activations.h"

namespace autoglm::cpu {

struct ElementOps {
  // the largest of s[0..n) (NaNs passed over), -inf for n = 0
  float (*max)(const float* s, int64_t n);
  // s[j] = exp(s[j] - max) in place (the vector exp, relative error ~1e-7); returns the sum
  float (*exp_sum)(float* s, int64_t n, float max);
  // gate[i] = silu(gate[i]) * up[i]
  void (*silu_mul)(float* gate, const float* up, int64_t n);
  // Activations to int8 blocks: bit-for-bit what ref::quantize_activations_q8 / _q8k give.
  void (*quantize_q8)(const float* x, int64_t n, Q8Block* out);
  void (*quantize_q8k)(const float* x, int64_t n, Q8KBlock* out);
};

const ElementOps& element_ops();

}  // namespace autoglm::cpu
