#include "model/model_spec.h"

#include <cmath>

namespace autoglm {

std::vector<double> ModelSpec::rope_inv_freq() const {
  std::vector<double> inv(size_t(n_rot / 2));
  for (size_t i = 0; i < inv.size(); ++i) {
    inv[i] = double(rope_freq_scale) * std::pow(double(rope_freq_base), -2.0 * double(i) / double(n_rot));
    if (i < rope_freq_factors.size()) inv[i] /= double(rope_freq_factors[i]);
  }
  return inv;
}

}  // namespace autoglm
