// Log-probabilities of the model's distribution (temperature 1, before penalties).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace autoglm {

// logprob of `token`, and the `top` most likely tokens with theirs (highest first).
float token_logprob(const float* logits, int32_t n_vocab, int32_t token, int32_t top,
                    std::vector<std::pair<int32_t, float>>& top_out);

}  // namespace autoglm
