#include "sample/sampler.h"

#include "kernels/cpu/element_ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

namespace autoglm {

Status validate_sampling_params(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0) return invalid_argument("temperature must be >= 0");
  if (!std::isfinite(p.top_p) || p.top_p <= 0 || p.top_p > 1) return invalid_argument("top_p must be in (0, 1]");
  if (!std::isfinite(p.min_p) || p.min_p < 0 || p.min_p > 1) return invalid_argument("min_p must be in [0, 1]");
  if (p.top_k < 0) return invalid_argument("top_k must be >= 0");
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0)
    return invalid_argument("repetition_penalty must be > 0");
  if (!std::isfinite(p.frequency_penalty) || std::fabs(p.frequency_penalty) > 2)
    return invalid_argument("frequency_penalty must be in [-2, 2]");
  if (!std::isfinite(p.presence_penalty) || std::fabs(p.presence_penalty) > 2)
    return invalid_argument("presence_penalty must be in [-2, 2]");
  if (p.penalty_last_n < -1) return invalid_argument("penalty_last_n must be >= -1");
  for (const auto& [token, bias] : p.logit_bias) {
    if (token < 0) return invalid_argument("logit_bias: token id " + std::to_string(token) + " is negative");
    if (!std::isfinite(bias) || bias < -100 || bias > 100)
      return invalid_argument("logit_bias: the bias of token " + std::to_string(token) + " must be in [-100, 100]");
  }
  return Status::ok();
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params), seed_(params.seed ? *params.seed : std::random_device{}()), rng_(seed_) {}

void Sampler::apply_penalties(float* logits, int32_t n_vocab, const std::vector<int32_t>& history) {
  const bool any =
      params_.repetition_penalty != 1.0f || params_.frequency_penalty != 0 || params_.presence_penalty != 0;
  if (!any || params_.penalty_last_n == 0 || history.empty()) return;
  const size_t window =
      params_.penalty_last_n < 0 ? history.size() : std::min(history.size(), size_t(params_.penalty_last_n));
  std::unordered_map<int32_t, int32_t> counts;
  for (size_t i = history.size() - window; i < history.size(); ++i) ++counts[history[i]];
  for (const auto& [token, count] : counts) {
    if (token < 0 || token >= n_vocab) continue;
    float& l = logits[token];
    l = l > 0 ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    l -= float(count) * params_.frequency_penalty + params_.presence_penalty;
  }
}

void Sampler::apply_logit_bias(float* logits, int32_t n_vocab) const {
  for (const auto& [token, bias] : params_.logit_bias)
    if (token >= 0 && token < n_vocab) logits[token] = bias <= -100 ? -INFINITY : logits[token] + bias;
}

namespace {

double sum(const float* x, size_t n) {
  return cpu::element_ops().sum_f64(x, int64_t(n));
}

// x[j] = value where bucket[j] is past `last` (selects, not branches: the loop vectorizes).
void drop_past(const uint16_t* __restrict bucket, uint16_t last, float* __restrict x, float value, size_t n) {
  for (size_t j = 0; j < n; ++j) x[j] = bucket[j] > last ? value : x[j];
}

}  // namespace

// The candidates that top-k and min-p keep, in token order, with their probabilities at
// `temperature` relative to the best token; a candidate min-p drops gets logit -inf and
// probability 0. No full sort: top-k is a selection, min-p a threshold on the logit
// (p >= min_p * p_max). Returns the mass of what top-k kept, min-p's cut included (top-p's
// share is of that mass, at temperature 1).
double Sampler::gather_candidates(const float* logits, int32_t n_vocab, float max_logit, float temperature) {
  const float floor = params_.min_p > 0 ? max_logit + std::log(params_.min_p) : -INFINITY;
  const bool top_k = params_.top_k > 0 && params_.top_k < n_vocab;
  every_token_ = every_token_a_candidate(n_vocab);  // the complement of min-p's branch below, NaN included
  ids_.clear();
  if (top_k) {
    select_top_k(logits, n_vocab, params_.top_k);
  } else if (params_.min_p > 0) {
    for (int32_t i = 0; i < n_vocab; ++i)
      if (logits[i] >= floor) ids_.push_back(i);
  }
  const size_t n = every_token_ ? size_t(n_vocab) : ids_.size();
  if (every_token_) {  // candidate j is token j: a copy, no ids, no gather
    logits_.assign(logits, logits + n);
  } else {
    logits_.resize(n);
    for (size_t j = 0; j < n; ++j) logits_[j] = logits[ids_[j]];
  }
  const double mass = exponentiate(max_logit, temperature);  // before min-p: with top-k, min-p comes last
  if (params_.min_p > 0)
    for (size_t j = 0; j < n; ++j)
      if (logits_[j] < floor) logits_[j] = -INFINITY, probs_[j] = 0;
  return mass;
}

// ids_ = the k best tokens (higher logit; ties: the lower id; a NaN counts as -inf), in token
// order. One pass in token order with a heap of the k best so far, worst on top: a token enters
// only when it beats that worst one, which past the first tokens is rare, so most cost one
// comparison (nth_element over 151936 logits took 1.7 ms a token; this 0.14). A later token that
// ties the worst loses the tie.
void Sampler::select_top_k(const float* logits, int32_t n_vocab, int32_t k) {
  auto key = [&](int32_t i) { return std::isnan(logits[i]) ? -INFINITY : logits[i]; };
  auto better = [&](int32_t a, int32_t b) { return key(a) > key(b) || (key(a) == key(b) && a < b); };
  ids_.resize(size_t(k));
  std::iota(ids_.begin(), ids_.end(), 0);
  std::make_heap(ids_.begin(), ids_.end(), better);
  float worst = key(ids_.front());
  for (int32_t i = k; i < n_vocab; ++i) {
    if (!(logits[i] > worst)) continue;  // a NaN never enters
    std::pop_heap(ids_.begin(), ids_.end(), better);
    ids_.back() = i;
    std::push_heap(ids_.begin(), ids_.end(), better);
    worst = key(ids_.front());
  }
  std::sort(ids_.begin(), ids_.end());
}

// probs_ = exp((logits_ - max) / temperature) with the kernels' vector exp; banned and masked
// tokens (-inf) get exactly 0. Returns the sum.
double Sampler::exponentiate(float max_logit, float temperature) {
  return exponentiate(logits_.data(), logits_.size(), max_logit, temperature, probs_);
}

double Sampler::exponentiate(const float* logits, size_t n, float max_logit, float temperature,
                             std::vector<float>& probs) {
  probs.resize(n);
  const float inv = 1.0f / temperature;
  for (size_t j = 0; j < n; ++j) probs[j] = logits[j] * inv;
  cpu::element_ops().exp_sum(probs.data(), int64_t(n), max_logit * inv);
  for (size_t j = 0; j < n; ++j) probs[j] = logits[j] == -INFINITY ? 0.0f : probs[j];  // a select: vectorized
  return sum(probs.data(), n);
}

// Keeps the smallest set of the most likely candidates whose mass reaches top_p (the others
// get logit -inf and probability 0) and returns the mass kept. Instead of sorting, the candidates fall
// into buckets by logit; whole buckets are kept from the top, and only the bucket where the
// mass crosses top_p is sorted (the same set a full sort finds, ties by token id).
double Sampler::select_top_p(float max_logit, double mass) {
  constexpr int kBuckets = 4096;
  constexpr float kRange = 40;  // below max - 40 a token's share is under e^-40
  const double target = double(params_.top_p) * mass;
  const size_t n = logits_.size();
  // Four interleaved histograms: neighbours often share a bucket, and one histogram would
  // make each addition wait for the last.
  bucket_mass_.assign(4 * kBuckets, 0.0);
  buckets_.resize(n);
  for (size_t j = 0; j < n; ++j) {  // no stores to the histogram here: this loop vectorizes
    // Clamped as a float: a masked token's distance is infinite.
    const float distance = (max_logit - logits_[j]) * (kBuckets / kRange);
    buckets_[j] = uint16_t(distance < float(kBuckets - 1) ? int(distance) : kBuckets - 1);
  }
  for (size_t j = 0; j < n; ++j) bucket_mass_[size_t(buckets_[j]) * 4 + (j & 3)] += probs_[j];
  for (int b = 0; b < kBuckets; ++b)
    bucket_mass_[size_t(b)] = bucket_mass_[size_t(b) * 4] + bucket_mass_[size_t(b) * 4 + 1] +
                              bucket_mass_[size_t(b) * 4 + 2] + bucket_mass_[size_t(b) * 4 + 3];
  uint16_t crossing = 0;
  double kept = 0;  // mass of the buckets above the crossing one
  while (crossing < kBuckets - 1 && kept + bucket_mass_[crossing] < target) kept += bucket_mass_[crossing++];
  crossing_order_.clear();
  for (size_t j = 0; j < n; ++j)  // few: a branch the predictor gets right
    if (buckets_[j] == crossing && probs_[j] > 0) crossing_order_.push_back(j);
  drop_past(buckets_.data(), crossing, logits_.data(), -INFINITY, n);
  drop_past(buckets_.data(), crossing, probs_.data(), 0.0f, n);
  std::sort(crossing_order_.begin(), crossing_order_.end(), [&](size_t a, size_t b) {
    return logits_[a] > logits_[b] || (logits_[a] == logits_[b] && id_of(a) < id_of(b));
  });
  size_t taken = 0;  // the crossing bucket's best, until the mass reaches top_p
  while (taken < crossing_order_.size() && kept < target) kept += probs_[crossing_order_[taken++]];
  for (size_t k = taken; k < crossing_order_.size(); ++k)
    logits_[crossing_order_[k]] = -INFINITY, probs_[crossing_order_[k]] = 0;
  return kept;
}

int32_t Sampler::sample(float* logits, int32_t n_vocab, const std::vector<int32_t>& history) {
  apply_logit_bias(logits, n_vocab);
  apply_penalties(logits, n_vocab, history);
  if (params_.temperature <= 0) return int32_t(std::max_element(logits, logits + n_vocab) - logits);
  const float max_logit = cpu::element_ops().max(logits, n_vocab);
  // Top-p needs the probabilities at temperature 1; without it they are made at the
  // temperature at once. Dropped candidates have logit -inf, so they stay at 0.
  const bool top_p = params_.top_p < 1.0f;
  if (top_p && every_token_a_candidate(n_vocab)) {
    const int32_t token = draw_from_nucleus(logits, n_vocab, max_logit);
    if (token >= 0) return token;
  }
  const double mass = gather_candidates(logits, n_vocab, max_logit, top_p ? 1.0f : params_.temperature);
  if (top_p) {
    select_top_p(max_logit, mass);
    if (params_.temperature != 1.0f) exponentiate(max_logit, params_.temperature);
  }
  return draw(sum(probs_.data(), probs_.size()));
}

// Top-p over the whole vocabulary without finding the nucleus first: a token drawn from every
// token's probability (at the temperature) is kept when the tokens ranked above it (a higher
// logit, or the same and a lower id) hold less than top_p of the mass at temperature 1, which is
// what being in the nucleus means. A kept draw has the nucleus's distribution, and at temperature
// 1 a draw is kept with probability top_p or more. Two passes over the vocabulary a try where
// the nucleus's selection takes about ten (151936 tokens, Intel Xeon, `autoglm bench`'s decode:
// 0.60 -> 0.24 ms a draw). Returns -1 after kTries misses (a small top_p at a high temperature) or
// where the probabilities' sum is not a finite positive number: the caller then finds the nucleus
// and draws from it, and the draws, kept or not, still follow the nucleus's distribution.
int32_t Sampler::draw_from_nucleus(const float* logits, int32_t n_vocab, float max_logit) {
  constexpr int kTries = 4;
  const size_t n = size_t(n_vocab);
  every_token_ = true;
  ids_.clear();
  const double total = exponentiate(logits, n, max_logit, params_.temperature, probs_);
  const bool tempered = params_.temperature != 1.0f;
  const double mass = tempered ? exponentiate(logits, n, max_logit, 1.0f, nucleus_probs_) : total;
  const std::vector<float>& unit = tempered ? nucleus_probs_ : probs_;
  if (!(total > 0 && total < INFINITY && mass > 0 && mass < INFINITY)) return -1;
  const double target = double(params_.top_p) * mass;
  for (int i = 0; i < kTries; ++i) {
    const int32_t token = draw(total);
    // the mass of the tokens ranked above it: a higher logit, or the same and a lower id
    const float l = logits[token];
    if (cpu::element_ops().sum_ranked_above(logits, unit.data(), int64_t(n), l, token) < target) return token;
  }
  return -1;
}

// One draw in proportion to probs_ (their sum `total`): blocks are skipped by their sums, then
// one block is scanned.
int32_t Sampler::draw(double total) {
  constexpr size_t kBlock = 256;
  const size_t n = probs_.size();
  std::uniform_real_distribution<double> uniform(0.0, total);
  double r = uniform(rng_);
  size_t start = 0;
  for (; start + kBlock < n; start += kBlock) {
    const double block = sum(probs_.data() + start, kBlock);
    if (r < block) break;
    r -= block;
  }
  for (size_t j = start; j < n; ++j)
    if (probs_[j] > 0 && (r -= probs_[j]) < 0) return id_of(j);
  for (size_t j = n; j-- > 0;)  // rounding left r above 0: the last candidate with a chance
    if (probs_[j] > 0) return id_of(j);
  return id_of(0);
}

}  // namespace autoglm
