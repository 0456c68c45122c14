// Binds the tensors of a GGUF file to the roles of the decoder, checking every shape.
#pragma once

#include <vector>

#include "autoglm/status.h"
#include "formats/gguf.h"
#include "kernels/cpu/matmul.h"
#include "model/model_spec.h"

namespace autoglm {

using Vec = std::vector<float>;  // small per-channel parameters, kept as floats

struct LayerWeights {
  Vec attn_norm, ffn_norm;
  cpu::WeightMatrix wq, wk, wv, wo;
  Vec bq, bk, bv;                     // empty when the file has none
  Vec attn_post_norm, ffn_post_norm;  // empty unless spec.post_norms
  Vec q_norm, k_norm;                 // empty unless spec.qk_norm ([head_dim] each)
  cpu::WeightMatrix gate, up, down;
};

struct ModelWeights {
  cpu::WeightMatrix token_embd;  // [n_vocab, n_embd]
  cpu::WeightMatrix output;      // [n_vocab, n_embd]; token_embd when tied
  Vec output_norm;
  std::vector<LayerWeights> layers;
};

// Fills `spec.n_vocab` (from token_embd when the metadata did not say),
// `spec.tied_embeddings` and `spec.rope_freq_factors` (rope_freqs.weight). Fused tensors
// (attn_qkv = [q; k; v] rows, ffn_up = [gate; up] rows without ffn_gate) are bound as
// views of their row ranges. Errors name the file and the tensor.
Result<ModelWeights> bind_weights(const GgufFile& file, ModelSpec& spec);

}  // namespace autoglm
