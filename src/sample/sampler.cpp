#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
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

int32_t Sampler::sample(float* logits, int32_t n_vocab, const std::vector<int32_t>& history) {
  apply_logit_bias(logits, n_vocab);
  apply_penalties(logits, n_vocab, history);
  if (params_.temperature <= 0) return int32_t(std::max_element(logits, logits + n_vocab) - logits);

  candidates_.resize(size_t(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i) candidates_[size_t(i)] = {logits[i], i};
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t n = candidates_.size();
  if (params_.top_k > 0 && size_t(params_.top_k) < n) {
    n = size_t(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + long(n), candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  // Probabilities at temperature 1 decide what top-p and min-p keep.
  probs_.resize(n);
  std::vector<double>& probs = probs_;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += probs[i] = std::exp(double(candidates_[i].first - candidates_[0].first));
  size_t keep = n;
  if (params_.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < n; ++i) {
      cum += probs[i] / sum;
      if (cum >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (params_.min_p > 0) {
    const double threshold = params_.min_p * probs[0];
    size_t i = 1;
    while (i < keep && probs[i] >= threshold) ++i;
    keep = i;
  }
  // Temperature reshapes what is left; then one draw.
  double total = 0;
  for (size_t i = 0; i < keep; ++i)
    total += probs[i] = std::exp(double(candidates_[i].first - candidates_[0].first) / params_.temperature);
  std::uniform_real_distribution<double> uniform(0.0, total);
  double r = uniform(rng_);
  for (size_t i = 0; i < keep; ++i) {
    r -= probs[i];
    if (r <= 0) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

}  // namespace autoglm
