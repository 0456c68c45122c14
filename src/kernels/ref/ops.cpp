#include "kernels/ref/ops.h"

#include <cmath>
#include <vector>

namespace autoglm::ref {

void rmsnorm(const float* x, const float* w, float eps, int64_t n, float* y) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i]) * x[i];
  const double scale = 1.0 / std::sqrt(sum / double(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = float(double(x[i]) * scale * (w ? double(w[i]) : 1.0));
}

void add_rmsnorm(float* x, const float* delta, const float* w, float eps, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) x[i] = float(double(x[i]) + delta[i]);
  rmsnorm(x, w, eps, n, y);
}

void rope(float* x, int n_heads, int head_dim, int n_rot, float pos, const double* inv_freq, cpu::RopeStyle style) {
  const int half = n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const int a = style == cpu::RopeStyle::kNeox ? i : 2 * i;
      const int b = style == cpu::RopeStyle::kNeox ? i + half : 2 * i + 1;
      const double theta = double(pos) * inv_freq[i];
      const double x0 = v[a], x1 = v[b];
      v[a] = float(x0 * std::cos(theta) - x1 * std::sin(theta));
      v[b] = float(x0 * std::sin(theta) + x1 * std::cos(theta));
    }
  }
}

void softmax(float* x, int64_t n) {
  double mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, double(x[i]));
  std::vector<double> e(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += e[size_t(i)] = std::exp(double(x[i]) - mx);
  for (int64_t i = 0; i < n; ++i) x[i] = float(e[size_t(i)] / sum);
}

void silu_mul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gate[i] = float(double(gate[i]) / (1.0 + std::exp(-double(gate[i]))) * up[i]);
}

}  // namespace autoglm::ref
