#include "model/model_spec.h"

#include <algorithm>
#include <cmath>

namespace autoglm {
namespace {

// YaRN's correction dimension: the pair index whose wavelength fits `n_rotations` times in
// the original context.
double yarn_corr_dim(double n_rot, double orig_ctx, double n_rotations, double base) {
  return n_rot * std::log(orig_ctx / (n_rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
}

}  // namespace

std::vector<double> ModelSpec::rope_inv_freq() const {
  std::vector<double> inv(size_t(n_rot / 2));
  double lo = 0, hi = 0;
  if (yarn_orig_ctx > 0) {
    lo = std::max(0.0, std::floor(yarn_corr_dim(double(n_rot), double(yarn_orig_ctx), yarn_beta_fast, rope_freq_base)));
    hi = std::min(double(n_rot - 1),
                  std::ceil(yarn_corr_dim(double(n_rot), double(yarn_orig_ctx), yarn_beta_slow, rope_freq_base)));
  }
  for (size_t i = 0; i < inv.size(); ++i) {
    const double base = std::pow(double(rope_freq_base), -2.0 * double(i) / double(n_rot));
    inv[i] = double(rope_freq_scale) * base;
    if (yarn_orig_ctx > 0) {  // high frequencies keep their angle, low ones are interpolated
      const double ramp = 1.0 - std::clamp((double(i) - lo) / std::max(0.001, hi - lo), 0.0, 1.0);
      inv[i] = inv[i] * (1.0 - ramp) + base * ramp;
    }
    if (i < rope_freq_factors.size()) inv[i] /= double(rope_freq_factors[i]);
  }
  return inv;
}

std::vector<uint8_t> ModelSpec::rope_pair_axes() const {
  std::vector<uint8_t> axes;
  if (!mrope()) return axes;
  const int32_t total = rope_sections[0] + rope_sections[1] + rope_sections[2];
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const int32_t sector = int32_t(i % total);  // as llama.cpp: the runs repeat past their sum
    axes.push_back(sector < rope_sections[0] ? 0 : sector < rope_sections[0] + rope_sections[1] ? 1 : 2);
  }
  return axes;
}

float ModelSpec::attention_scale() const {
  return attn_scale > 0 ? attn_scale : 1.0f / std::sqrt(float(head_dim));
}

}  // namespace autoglm
