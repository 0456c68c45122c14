#include "sample/logprobs.h"

#include <algorithm>
#include <cmath>

namespace autoglm {

float token_logprob(const float* logits, int32_t n_vocab, int32_t token, int32_t top,
                    std::vector<std::pair<int32_t, float>>& top_out) {
  const float mx = *std::max_element(logits, logits + n_vocab);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i] - mx));
  const float log_z = mx + float(std::log(sum));
  top_out.clear();
  if (top > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
    for (int32_t i = 0; i < n_vocab; ++i) ids[size_t(i)] = i;
    const int32_t k = std::min(top, n_vocab);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (int32_t i = 0; i < k; ++i) top_out.emplace_back(ids[size_t(i)], logits[ids[size_t(i)]] - log_z);
  }
  return logits[token] - log_z;
}

}  // namespace autoglm
