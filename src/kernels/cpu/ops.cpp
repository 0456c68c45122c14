#include "kernels/cpu/ops.h"

#include <cmath>

#include "kernels/cpu/element_ops.h"

namespace autoglm::cpu {

void rmsnorm(const float* x, const float* w, float eps, int64_t n, float* y) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i]) * double(x[i]);
  const float scale = float(1.0 / std::sqrt(sum / double(n) + double(eps)));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

void add_rmsnorm(float* x, const float* delta, const float* w, float eps, int64_t n, float* y) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] += delta[i];
    sum += double(x[i]) * double(x[i]);
  }
  const float scale = float(1.0 / std::sqrt(sum / double(n) + double(eps)));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

namespace {

// Rotates pair i of every head by theta(i).
template <typename Theta>
void rotate_pairs(float* x, int n_heads, int head_dim, int n_rot, RopeStyle style, float mscale, Theta theta_of) {
  const int half = n_rot / 2;
  for (int i = 0; i < half; ++i) {
    const double theta = theta_of(i);
    const float c = float(std::cos(theta)) * mscale, s = float(std::sin(theta)) * mscale;
    const int a = style == RopeStyle::kNeox ? i : 2 * i;
    const int b = style == RopeStyle::kNeox ? i + half : 2 * i + 1;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + int64_t(h) * head_dim;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

}  // namespace

void rope(float* x, int n_heads, int head_dim, int n_rot, float pos, const double* inv_freq, RopeStyle style,
          float mscale) {
  rotate_pairs(x, n_heads, head_dim, n_rot, style, mscale, [&](int i) { return double(pos) * inv_freq[i]; });
}

void rope_pairs(float* x, int n_heads, int head_dim, int n_rot, const float* pair_pos, const double* inv_freq,
                RopeStyle style, float mscale) {
  rotate_pairs(x, n_heads, head_dim, n_rot, style, mscale, [&](int i) { return double(pair_pos[i]) * inv_freq[i]; });
}

void softmax(float* x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::fmax(mx, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = float(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void silu_mul(float* gate, const float* up, int64_t n) {
  element_ops().silu_mul(gate, up, n);
}

void clamped_swiglu(float* gate, const float* up, int64_t n, float alpha, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::fmin(gate[i], limit), u = std::fmax(std::fmin(up[i], limit), -limit);
    gate[i] = g / (1.0f + std::exp(-alpha * g)) * (u + 1.0f);
  }
}

}  // namespace autoglm::cpu
