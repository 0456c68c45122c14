// How the next token is chosen from the logits.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace autoglm {

struct SamplingParams {
  float temperature = 0.8f;         // <= 0: greedy (argmax after penalties)
  int32_t top_k = 40;               // <= 0: off
  float top_p = 0.95f;              // >= 1: off
  float min_p = 0.05f;              // <= 0: off; keeps tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f;  // 1: off; divides positive logits, multiplies negative ones
  float frequency_penalty = 0.0f;   // subtracted once per earlier occurrence
  float presence_penalty = 0.0f;    // subtracted once if the token occurred
  int32_t penalty_last_n = 64;      // window of recent tokens the penalties look at; -1: all
  std::optional<uint64_t> seed;     // same seed, same output; none: a random seed
  // Added to a token's logit before everything else (OpenAI's logit_bias): in [-100, 100];
  // -100 bans the token, +100 all but forces it. A grammar's mask still wins.
  std::vector<std::pair<int32_t, float>> logit_bias;
};

}  // namespace autoglm
