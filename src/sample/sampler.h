// The sampler chain: penalties, then top-k, top-p, min-p, temperature, and a draw.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "autoglm/sampling_params.h"
#include "autoglm/status.h"

namespace autoglm {

// Checks ranges; the message names the parameter.
Status validate_sampling_params(const SamplingParams& p);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks the next token from one row of logits (modified in place by the penalties).
  // `history` is every token of the sequence so far, prompt included.
  int32_t sample(float* logits, int32_t n_vocab, const std::vector<int32_t>& history);

  uint64_t seed() const { return seed_; }

 private:
  void apply_penalties(float* logits, int32_t n_vocab, const std::vector<int32_t>& history);
  void apply_logit_bias(float* logits, int32_t n_vocab) const;
  void select_top_k(const float* logits, int32_t n_vocab, int32_t k);
  double gather_candidates(const float* logits, int32_t n_vocab, float max_logit, float temperature);
  double exponentiate(float max_logit, float temperature);
  static double exponentiate(const float* logits, size_t n, float max_logit, float temperature,
                             std::vector<float>& probs);
  double select_top_p(float max_logit, double mass);
  int32_t draw_from_nucleus(const float* logits, int32_t n_vocab, float max_logit);
  int32_t draw(double total);
  // Neither top-k nor min-p narrows the candidates.
  bool every_token_a_candidate(int32_t n_vocab) const {
    return !(params_.top_k > 0 && params_.top_k < n_vocab) && !(params_.min_p > 0);
  }
  // The token of candidate j.
  int32_t id_of(size_t j) const { return every_token_ ? int32_t(j) : ids_[j]; }

  SamplingParams params_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  // The candidates (token order), reused between calls: ids, logits (-inf: dropped) and
  // probabilities relative to the best (0: dropped).
  std::vector<int32_t> ids_;  // empty when every token is a candidate (every_token_)
  bool every_token_ = false;
  std::vector<float> logits_, probs_;
  std::vector<float> nucleus_probs_;  // at temperature 1, where the draws' temperature is not
  std::vector<double> bucket_mass_;
  std::vector<uint16_t> buckets_;
  std::vector<size_t> crossing_order_;
};

}  // namespace autoglm
