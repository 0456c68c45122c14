// Embeddings from a decoder model: each input's final normed hidden states, pooled (last
// token or mean) and L2-normalised. Inputs are packed into ragged batches of up to
// `max_batch_tokens` (a long input is split across batches; its KV carries over).
#pragma once

#include <cstdint>
#include <vector>

#include "autoglm/engine.h"
#include "model/runner.h"

namespace autoglm {

struct EmbeddingJob {
  std::vector<std::vector<int32_t>> inputs;  // token ids, none empty
  Pooling pooling = Pooling::kLast;
};

// Scales `v` to unit length (a zero vector stays zero).
void normalize_l2(std::vector<float>& v);

// One vector of n_embd floats per input, unit length.
Result<std::vector<std::vector<float>>> compute_embeddings(ModelRunner& runner, const ModelSpec& spec, DType kv_type,
                                                           const EmbeddingJob& job, int64_t max_batch_tokens);

}  // namespace autoglm
