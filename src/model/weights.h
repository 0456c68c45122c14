// Binds the tensors of a GGUF file to the roles of the decoder, checking every shape.
#pragma once

#include <vector>

#include "autoglm/status.h"
#include "formats/gguf.h"
#include "kernels/cpu/matmul.h"
#include "model/model_spec.h"
#include "model/tensor_binder.h"

namespace autoglm {

// The routed experts of one layer and what picks them. Expert matrices are views of the
// file's 3-D tensors, one per expert (rows of expert e follow those of e - 1).
struct ExpertWeights {
  cpu::WeightMatrix router;  // ffn_gate_inp [n_expert, n_embd]
  Vec router_bias;           // gpt-oss: added to the router's logits
  Vec selection_bias;        // exp_probs_b: added to the scores for the choice only
  std::vector<cpu::WeightMatrix> gate, up, down;
  Vec gate_bias, up_bias, down_bias;  // gpt-oss: [n_expert * rows], empty otherwise
  // The shared expert (rows 0: none), and qwen2moe's gate vector over the input.
  cpu::WeightMatrix shared_gate, shared_up, shared_down;
  cpu::WeightMatrix shared_gate_inp;  // [1, n_embd]; rows 0: ungated
};

// Multi-head latent attention: low-rank q, the compressed KV projection, and per-head
// matrices that map a query's non-rotated part into the latent space (k_b) and the
// latent attention output back to the head's values (v_b).
struct MlaWeights {
  cpu::WeightMatrix q_a, q_b;  // q_lora_rank > 0
  cpu::WeightMatrix q;         // q_lora_rank == 0
  Vec q_a_norm, kv_a_norm;
  cpu::WeightMatrix kv_a;              // [kv_lora_rank + n_rot, n_embd]
  std::vector<cpu::WeightMatrix> k_b;  // per head [kv_lora_rank, qk_nope]
  std::vector<cpu::WeightMatrix> v_b;  // per head [v_head, kv_lora_rank]
};

struct LayerWeights {
  Vec attn_norm, ffn_norm;
  cpu::WeightMatrix wq, wk, wv, wo;
  Vec bq, bk, bv;                     // empty when the file has none
  Vec bo;                             // output projection bias (gpt-oss); empty when none
  Vec sinks;                          // attention sink logit per query head (gpt-oss)
  MlaWeights mla;                     // spec.mla.enabled()
  ExpertWeights experts;              // spec.moe.is_moe_layer(layer)
  Vec attn_post_norm, ffn_post_norm;  // empty unless spec.post_norms
  Vec q_norm, k_norm;                 // empty unless spec.qk_norm ([head_dim] each)
  cpu::WeightMatrix gate, up, down;
};

// A next-token-prediction (MTP) block of GLM-4.5 and DeepSeek-V3, after the decoder's
// layers: a decoder layer whose input mixes the embedding of the token just produced with
// the target's last hidden state, and an output head of its own.
struct NextnWeights {
  LayerWeights layer;
  cpu::WeightMatrix eh_proj;  // [n_embd, 2 * n_embd] over [enorm(embedding) ; hnorm(hidden)]
  Vec enorm, hnorm;
  Vec shared_head_norm;     // output_norm where the file has none
  cpu::WeightMatrix embed;  // nextn.embed_tokens, or token_embd
  cpu::WeightMatrix head;   // nextn.shared_head_head, or output
};

struct ModelWeights {
  cpu::WeightMatrix token_embd;  // [n_vocab, n_embd]
  cpu::WeightMatrix output;      // [n_vocab, n_embd]; token_embd when tied
  Vec output_norm;
  std::vector<LayerWeights> layers;
  // The NextN blocks (spec.n_nextn of them, after `layers`); empty where the file declares
  // none or lacks their tensors (a converter may drop them). The forward pass never runs them.
  std::vector<NextnWeights> nextn;
};

// Fills `spec.n_vocab` (from token_embd when the metadata did not say),
// `spec.tied_embeddings` and `spec.rope_freq_factors` (rope_freqs.weight). Fused tensors
// (attn_qkv = [q; k; v] rows, ffn_up = [gate; up] rows without ffn_gate) are bound as
// views of their row ranges. The NextN blocks are bound where the first one's eh_proj is
// present. Errors name the file and the tensor.
Result<ModelWeights> bind_weights(const GgufFile& file, ModelSpec& spec);

}  // namespace autoglm
