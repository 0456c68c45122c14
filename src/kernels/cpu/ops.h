// The non-matmul ops of the decoder as the forward pass runs them (kernels/cpu/ops.h holds
// their double-precision oracles).
#pragma once

#include <cstdint>

namespace autoglm::cpu {

// y = x / sqrt(mean(x^2) + eps) * w (w may be null: no scaling). y may alias x.
void rmsnorm(const float* x, const float* w, float eps, int64_t n, float* y);

// x += delta, then y = rmsnorm(x) * w, in one pass over x (the residual add fused into the next norm).
void add_rmsnorm(float* x, const float* delta, const float* w, float eps, int64_t n, float* y);

enum class RopeStyle { kAdjacentPairs, kNeox };  // pairs (2i, 2i+1) or (i, i + n_rot/2)

// Rotates the first n_rot dims of each of n_heads vectors of head_dim floats at `x`, in place:
// theta_i = pos * freq_scale * base^(-2i/n_rot).
// inv_freq: n_rot/2 angles per position, one per rotated pair.
// mscale multiplies cos and sin (YaRN's attention factor; 1 otherwise).
void rope(float* x, int n_heads, int head_dim, int n_rot, float pos, const double* inv_freq, RopeStyle style,
          float mscale = 1.0f);

// rope with a position per rotated pair (M-RoPE: each pair turns by its axis's position):
// theta_i = pair_pos[i] * inv_freq[i].
void rope_pairs(float* x, int n_heads, int head_dim, int n_rot, const float* pair_pos, const double* inv_freq,
                RopeStyle style, float mscale = 1.0f);

// In-place softmax of n values.
void softmax(float* x, int64_t n);

// gate[i] = silu(gate[i]) * up[i].
void silu_mul(float* gate, const float* up, int64_t n);

// gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit);
// gate[i] = g * sigmoid(alpha * g) * (u + 1).
void clamped_swiglu(float* gate, const float* up, int64_t n, float alpha, float limit);

}  // namespace autoglm::cpu
