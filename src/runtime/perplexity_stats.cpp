#include "runtime/perplexity_stats.h"

#include <algorithm>
#include <cmath>

namespace autoglm {
namespace {

constexpr float kKlFloor = -16.0f;  // base log-probs at or below it add nothing to the KLD

// Covariance of two series' means from their sums (0 for fewer than 10 values).
double covariance(double sum_a, double sum_b, double sum_ab, int64_t n) {
  if (n < 10) return 0;
  const double dn = double(n);
  return (sum_ab / dn - (sum_a / dn) * (sum_b / dn)) / (dn - 1);
}

int64_t argmax(const float* v, int64_t n) {
  return std::max_element(v, v + n) - v;  // the first of equal maxima
}

}  // namespace

Estimate mean_and_error(double sum, double sum2, int64_t n) {
  if (n < 1) return {};
  const double dn = double(n), mean = sum / dn, var = sum2 / dn - mean * mean;
  return {mean, var > 0 && n > 10 ? std::sqrt(var / (dn - 1)) : 0.0};
}

double percentile(const std::vector<float>& sorted, double f) {
  if (sorted.empty()) return 0;
  if (f <= 0) return sorted.front();
  if (f >= 1) return sorted.back();
  const double x = f * double(sorted.size() - 1);
  const size_t k = size_t(x);
  const double frac = x - double(k);
  return (1 - frac) * sorted[k] + frac * sorted[std::min(k + 1, sorted.size() - 1)];
}

void log_softmax(const float* logits, int64_t n, float* out) {
  const float top = *std::max_element(logits, logits + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(logits[i] - top));
  const float shift = top + float(std::log(sum));
  for (int64_t i = 0; i < n; ++i) out[i] = logits[i] - shift;
}

Estimate NllSums::ppl() const {
  const Estimate m = mean_and_error(sum, sum2, count);
  const double p = std::exp(m.value);
  return {p, p * m.error};
}

void KlSums::add(const float* log_q, const float* log_p, int64_t n_vocab, int32_t next) {
  const double nll_q = -double(log_q[next]), nll_p = -double(log_p[next]);
  nll.add(nll_q);
  base_nll.add(nll_p);
  nll_cross += nll_q * nll_p;
  double k = 0;
  for (int64_t i = 0; i < n_vocab; ++i)
    if (log_p[i] > kKlFloor) k += double(std::exp(log_p[i]) * (log_p[i] - log_q[i]));
  kld += k, kld2 += k * k;
  klds.push_back(float(k));
  const double d = std::exp(-nll_q) - std::exp(-nll_p);
  dp += d, dp2 += d * d, dp4 += d * d * d * d;
  dps.push_back(float(d));
  same_top += argmax(log_q, n_vocab) == argmax(log_p, n_vocab);
  ++count;
}

KlDivergenceStats KlSums::stats(bool with_percentiles) const {
  KlDivergenceStats s;
  s.ppl = nll.ppl();
  s.base_ppl = base_nll.ppl();
  const Estimate a = mean_and_error(nll.sum, nll.sum2, count), b = mean_and_error(base_nll.sum, base_nll.sum2, count);
  const double cov = covariance(nll.sum, base_nll.sum, nll_cross, count);
  s.ln_ppl_ratio = {a.value - b.value, std::sqrt(std::max(0.0, a.error * a.error + b.error * b.error - 2 * cov))};
  s.ppl_correlation = a.error > 0 && b.error > 0 ? cov / (a.error * b.error) : 0;
  s.kld = mean_and_error(kld, kld2, count);
  s.delta_p = mean_and_error(dp, dp2, count);
  const Estimate ms = mean_and_error(dp2, dp4, count);
  const double rms = std::sqrt(std::max(0.0, ms.value));
  s.rms_delta_p = {rms, rms > 0 ? 0.5 / rms * ms.error : 0};
  const double top = count ? double(same_top) / double(count) : 0;
  s.same_top = {top, count > 1 ? std::sqrt(top * (1 - top) / double(count - 1)) : 0};
  if (!with_percentiles) return s;
  auto k = klds, d = dps;
  std::sort(k.begin(), k.end());
  std::sort(d.begin(), d.end());
  s.kld_max = percentile(k, 1), s.kld_p99_9 = percentile(k, 0.999), s.kld_p99 = percentile(k, 0.99);
  s.kld_p95 = percentile(k, 0.95), s.kld_p90 = percentile(k, 0.90), s.kld_median = percentile(k, 0.5);
  s.kld_p10 = percentile(k, 0.10), s.kld_p5 = percentile(k, 0.05), s.kld_p1 = percentile(k, 0.01);
  s.kld_p0_1 = percentile(k, 0.001), s.kld_min = percentile(k, 0);
  s.delta_p_max = percentile(d, 1), s.delta_p_p99_9 = percentile(d, 0.999), s.delta_p_p99 = percentile(d, 0.99);
  s.delta_p_p95 = percentile(d, 0.95), s.delta_p_p90 = percentile(d, 0.90), s.delta_p_p75 = percentile(d, 0.75);
  s.delta_p_median = percentile(d, 0.5), s.delta_p_p25 = percentile(d, 0.25), s.delta_p_p10 = percentile(d, 0.10);
  s.delta_p_p5 = percentile(d, 0.05), s.delta_p_p1 = percentile(d, 0.01), s.delta_p_p0_1 = percentile(d, 0.001);
  s.delta_p_min = percentile(d, 0);
  return s;
}

}  // namespace autoglm
