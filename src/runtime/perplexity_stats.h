// The running sums of llama-perplexity's statistics, and the figures it reports from them.
#pragma once

#include <cstdint>
#include <vector>

#include "autoglm/perplexity.h"

namespace autoglm {

// Negative log-likelihood sums of one series.
struct NllSums {
  double sum = 0, sum2 = 0;
  int64_t count = 0;
  void add(double nll) { sum += nll, sum2 += nll * nll, ++count; }
  Estimate ppl() const;  // exp(mean), its error by the delta method
};

// One scored position of a comparison: the model's log-softmax (log_q) against the base's (log_p).
struct KlSums {
  NllSums nll, base_nll;
  double nll_cross = 0;  // sum of nll * base nll
  double kld = 0, kld2 = 0, dp = 0, dp2 = 0, dp4 = 0;
  int64_t same_top = 0, count = 0;
  std::vector<float> klds, dps;
  void add(const float* log_q, const float* log_p, int64_t n_vocab, int32_t next);
  // with_percentiles: sort the KLD and Δp series (the final report; running figures skip it).
  KlDivergenceStats stats(bool with_percentiles = true) const;
};

// mean and standard error of a series from its sum, sum of squares and count.
Estimate mean_and_error(double sum, double sum2, int64_t n);

// The f-quantile of sorted values, interpolated between neighbours.
double percentile(const std::vector<float>& sorted, double f);

// log-softmax of n logits into out, in double for the sum.
void log_softmax(const float* logits, int64_t n, float* out);

}  // namespace autoglm
