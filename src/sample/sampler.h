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

  SamplingParams params_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // reused between calls
  std::vector<double> probs_;                          // reused between calls
};

}  // namespace autoglm
