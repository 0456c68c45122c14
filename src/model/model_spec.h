// One description of a pre-norm decoder, with the switches that tell the
// supported architectures apart. Architecture files fill it in; one forward serves all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"

namespace autoglm {

struct ModelSpec {
  std::string arch;  // GGUF general.architecture
  std::string name;  // general.name, if any
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;    // per-head size of q and k (attention.key_length)
  int64_t head_dim_v = 0;  // per-head size of v (attention.value_length)
  int64_t n_ff = 0;
  int64_t n_rot = 0;  // rotated dims per head; the rest pass through
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
  // Per-frequency divisors of the rotation (rope_freqs.weight, Llama 3.1 scaling); empty: none.
  std::vector<float> rope_freq_factors;
  cpu::RopeStyle rope_style = cpu::RopeStyle::kAdjacentPairs;
  float rms_eps = 1e-5f;
  int64_t sliding_window = 0;  // a token sees only this many latest positions (Mistral); 0: all

  bool qkv_bias = false;         // q/k/v projections must carry biases (qwen2, chatglm); others may
  bool post_norms = false;       // RMSNorm of the attention and MLP outputs before the residual (glm4)
  bool qk_norm = false;          // RMSNorm of each q and k head before RoPE (qwen3)
  bool tied_embeddings = false;  // no output.weight: the logits reuse token_embd

  // Inverse frequency of each rotated pair, scaling and factors applied.
  std::vector<double> rope_inv_freq() const;

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
  int64_t v_dim() const { return n_head_kv * head_dim_v; }
};

}  // namespace autoglm
