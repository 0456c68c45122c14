// Which experts a token goes to and with what weight, from its router logits: the gating
// rules of the mixture-of-experts families (MoeSpec), one token at a time so that a token's
// choice never depends on its batch.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_spec.h"

namespace autoglm {

class ThreadPool;

// logits: [n_tokens, n_expert] (router bias already added). selection_bias (nullable,
// n_expert floats) shifts the scores the choice compares, not the weights. Writes
// n_expert_used ids and weights per token, best first (ties: the lower id).
void route_experts(const MoeSpec& moe, const float* logits, const float* selection_bias, int64_t n_tokens, int32_t* ids,
                   float* weights);

// A layer's routing as every backend runs it: the router bias (empty: none) added to `logits`
// in place, then route_experts into `ids` and `weights` (sized here). With a pool, a prompt's
// tokens are routed on its threads (each token alone, so the split changes nothing).
void route_layer(const MoeSpec& moe, float* logits, const std::vector<float>& router_bias,
                 const std::vector<float>& selection_bias, int64_t n_tokens, std::vector<int32_t>& ids,
                 std::vector<float>& weights, ThreadPool* pool = nullptr);

}  // namespace autoglm
