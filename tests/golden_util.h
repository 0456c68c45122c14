// Comparing logits with the reference engine's (../shared/golden): the per-case rule of
// its README (max |d|, rms of d, top-1 agreement).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

namespace autoglm {

struct Comparison {
  double max_abs = 0, rms = 0, top1 = 0;
};

inline int64_t argmax(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;  // ties keep the lowest id
  return best;
}

inline Comparison compare(const std::vector<float>& mine, const std::vector<float>& ref, int64_t n_vocab) {
  Comparison c;
  double sum_sq = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(mine[i]) - double(ref[i]);
    c.max_abs = std::max(c.max_abs, std::fabs(d));
    sum_sq += d * d;
  }
  c.rms = std::sqrt(sum_sq / double(ref.size()));
  const int64_t rows = int64_t(ref.size()) / n_vocab;
  int agree = 0;
  for (int64_t r = 0; r < rows; ++r)
    agree += argmax(&mine[size_t(r * n_vocab)], n_vocab) == argmax(&ref[size_t(r * n_vocab)], n_vocab);
  c.top1 = double(agree) / double(rows);
  return c;
}

inline std::vector<float> read_f32(const std::string& path) {
  const std::string bytes = test::read_file(path);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

}  // namespace autoglm
