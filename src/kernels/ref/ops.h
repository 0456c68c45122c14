// The oracles of the decoder's non-matmul ops (kernels/cpu/ops.h runs them): the same
// formulas evaluated in double precision throughout, for tests to compare against.
#pragma once

#include <cstdint>

#include "kernels/cpu/ops.h"

namespace autoglm::ref {

void rmsnorm(const float* x, const float* w, float eps, int64_t n, float* y);
void add_rmsnorm(float* x, const float* delta, const float* w, float eps, int64_t n, float* y);
void rope(float* x, int n_heads, int head_dim, int n_rot, float pos, const double* inv_freq, cpu::RopeStyle style);
void softmax(float* x, int64_t n);
void silu_mul(float* gate, const float* up, int64_t n);

}  // namespace autoglm::ref
