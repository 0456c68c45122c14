// One description of a pre-norm decoder, with the switches that tell the
// supported architectures apart. Architecture files fill it in; one forward serves all.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"

namespace autoglm {

// How a router's logits become the experts' weights (GGUF expert_gating_func and the arch).
enum class ExpertGating {
  kSoftmax,          // p = softmax(logits) over all experts; top-k by p (qwen3moe, qwen2moe, Mixtral)
  kSigmoid,          // p = sigmoid(logits); top-k by p + selection bias (glm4moe, deepseek2 V3)
  kSoftmaxSelected,  // top-k by logits; weights = softmax over the selected only (gpt-oss)
};

// The gated activation between an FFN's up and down projections.
enum class FfnActivation {
  kSiluGlu,        // silu(gate) * up
  kClampedSwiglu,  // gpt-oss: min(g, L) * sigmoid(alpha * min(g, L)) * (clamp(u, -L, L) + 1)
};

// Mixture-of-experts feed-forward layers; n_expert 0: every layer is dense.
struct MoeSpec {
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;    // top-k
  int64_t n_ff_exp = 0;         // rows of each routed expert's gate/up
  int64_t n_ff_shexp = 0;       // width of the shared expert (0: none)
  int64_t n_leading_dense = 0;  // layers [0, n) have a dense FFN of n_ff
  ExpertGating gating = ExpertGating::kSoftmax;
  bool norm_weights = true;    // selected weights divided by their sum
  float weights_scale = 1.0f;  // routed_scaling_factor
  int64_t n_group = 0;         // grouped top-k: groups of consecutive experts (0 or 1: none)
  int64_t n_group_used = 0;    // groups that stay eligible
  bool shared_gate = false;    // the shared expert's output times sigmoid(gate_inp_shexp . x) (qwen2moe)

  bool enabled() const { return n_expert > 0; }
  bool is_moe_layer(int64_t il) const { return enabled() && il >= n_leading_dense; }
};

// Multi-head latent attention (deepseek2): queries and keys through low-rank projections; the
// cache holds one shared latent head [c (kv_lora_rank) | k_pe (n_rot)] per position.
struct MlaSpec {
  int64_t q_lora_rank = 0;  // 0: q = attn_q * x directly
  int64_t kv_lora_rank = 0;
  int64_t qk_nope = 0;  // per-head key dims without rotation
  int64_t v_head = 0;   // per-head value dims after attn_v_b
  bool enabled() const { return kv_lora_rank > 0; }
};

struct ModelSpec {
  std::string arch;  // GGUF general.architecture
  std::string name;  // general.name, if any
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;  // layers the forward pass runs (block_count less the NextN layers)
  int64_t n_nextn = 0;  // next-token-prediction (MTP) blocks after them
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;    // per-head size of q and k as cached (attention.key_length)
  int64_t head_dim_v = 0;  // per-head size of v as cached (attention.value_length)
  int64_t n_ff = 0;
  int64_t n_rot = 0;  // rotated dims per head; the rest pass through
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
  // Per-frequency divisors of the rotation (rope_freqs.weight, Llama 3.1 scaling); empty: none.
  std::vector<float> rope_freq_factors;
  cpu::RopeStyle rope_style = cpu::RopeStyle::kAdjacentPairs;
  // YaRN (rope.scaling.type yarn): 0 original context means off.
  int64_t yarn_orig_ctx = 0;
  float yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;
  float rope_mscale = 1.0f;  // cos and sin times this (YaRN's attention factor)
  // Multimodal RoPE (Qwen2-VL, GLM-4.1V; GGUF rope.dimension_sections): the rotated pairs are cut
  // into runs for the axes t, h, w of a token's 3-D position (an image token's frame, row and
  // column); pair i turns by its axis's position. All zero: one position for every pair.
  std::array<int32_t, 3> rope_sections{};
  float rms_eps = 1e-5f;
  int64_t sliding_window = 0;    // a token sees only this many latest positions (Mistral); 0: all
  bool swa_even_layers = false;  // the window applies to layers 0, 2, 4...; the others see all (gpt-oss)
  float attn_scale = 0.0f;       // q.k scale; 0: 1/sqrt(head_dim)

  bool qkv_bias = false;         // q/k/v projections must carry biases (qwen2, chatglm); others may
  bool post_norms = false;       // RMSNorm of the attention and MLP outputs before the residual (glm4)
  bool qk_norm = false;          // RMSNorm of each q and k head before RoPE (qwen3)
  bool attn_sinks = false;       // a learned logit per head joins each softmax (gpt-oss)
  bool tied_embeddings = false;  // no output.weight: the logits reuse token_embd
  FfnActivation activation = FfnActivation::kSiluGlu;
  float swiglu_alpha = 1.702f, swiglu_limit = 7.0f;  // kClampedSwiglu
  MoeSpec moe;
  MlaSpec mla;

  // Inverse frequency of each rotated pair, scaling, YaRN and factors applied.
  std::vector<double> rope_inv_freq() const;
  bool mrope() const { return rope_sections[0] > 0; }
  // M-RoPE: the axis (0 t, 1 h, 2 w) of each of the n_rot / 2 rotated pairs; empty without it.
  std::vector<uint8_t> rope_pair_axes() const;
  // The window of layer il (0: it sees every position).
  int64_t layer_window(int64_t il) const { return swa_even_layers && il % 2 != 0 ? 0 : sliding_window; }
  // The window every layer keeps to (0 when some layer sees every position): what the KV
  // positions behind it may be freed by.
  int64_t window_of_every_layer() const { return swa_even_layers ? 0 : sliding_window; }
  float attention_scale() const;

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
  int64_t v_dim() const { return n_head_kv * head_dim_v; }
};

}  // namespace autoglm
