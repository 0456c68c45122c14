#include "engine/step_cost.h"

#include <cmath>

namespace autoglm {

void StepCostModel::observe(const StepShape& s, double ms) {
  const std::array<double, 3> x = {1.0, double(s.tokens), double(s.attended)};
  for (size_t i = 0; i < 3; ++i) {
    moment_[i] = kDecay * moment_[i] + x[i] * ms;
    for (size_t j = 0; j < 3; ++j) gram_[i][j] = kDecay * gram_[i][j] + x[i] * x[j];
  }
  ++observations_;
  // Ridge-regularised normal equations (small steps alone do not pin the position term),
  // solved by Gaussian elimination; coefficients stay >= 0.
  std::array<std::array<double, 4>, 3> m{};
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = 0; j < 3; ++j) m[i][j] = gram_[i][j];
    m[i][i] += 1e-6 * (1.0 + gram_[i][i]);
    m[i][3] = moment_[i];
  }
  for (size_t c = 0; c < 3; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < 3; ++r)
      if (std::fabs(m[r][c]) > std::fabs(m[pivot][c])) pivot = r;
    std::swap(m[c], m[pivot]);
    if (std::fabs(m[c][c]) < 1e-12) return;  // not enough information yet: keep the old fit
    for (size_t r = 0; r < 3; ++r) {
      if (r == c) continue;
      const double f = m[r][c] / m[c][c];
      for (size_t k = c; k < 4; ++k) m[r][k] -= f * m[c][k];
    }
  }
  for (size_t i = 0; i < 3; ++i) params_[i] = std::max(0.0, m[i][3] / m[i][i]);
}

}  // namespace autoglm
