// How the next token is chosen from the logits.
#pragma once

#include <cstdint>
#include <optional>

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
};

}  // namespace autoglm
