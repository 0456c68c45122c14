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
  // the sum of s[0..n) in double: value i into sum i % 8 of eight, added in one fixed order (the
  // same bits on every kernel set)
  double (*sum_f64)(const float* s, int64_t n);
  // as sum_f64, over p[i] where x[i] ranks above t: x[i] > t, or x[i] == t and i < ties_before
  double (*sum_ranked_above)(const float* x, const float* p, int64_t n, float t, int64_t ties_before);
  // gate[i] = silu(gate[i]) * up[i]
  void (*silu_mul)(float* gate, const float* up, int64_t n);
  // Activations to int8 blocks: bit-for-bit what ref::quantize_activations_q8 / _q8k give.
  void (*quantize_q8)(const float* x, int64_t n, Q8Block* out);
  void (*quantize_q8k)(const float* x, int64_t n, Q8KBlock* out);
};

const ElementOps& element_ops();

}  // namespace autoglm::cpu
