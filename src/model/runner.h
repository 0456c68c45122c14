// The forward pass over one ragged batch: the new tokens of one or more sequences,
// concatenated. Linear layers see one [T, d] matrix; attention reads each token's
// own sequence from its KV cache, positions 0..pos.
#pragma once

#include <cstdint>
#include <vector>

#include "autoglm/status.h"
#include "core/thread_pool.h"
#include "model/attention.h"
#include "model/kv_cache.h"
#include "model/lora_apply.h"
#include "model/model.h"
#include "model/op_profile.h"

namespace autoglm {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> seq;           // per token: index into caches
  std::vector<KvCache*> caches;       // one per sequence in the batch
  std::vector<int32_t> logit_tokens;  // indices of the tokens whose logits are wanted, ascending
  // Instead of logits, the final normed hidden state (n_embd floats) of each logit token:
  // what embeddings pool.
  bool hidden_states = false;
  // > 0: only layers [0, exit_layer), then the final norm and output head: the early-exit
  // drafts of speculative decoding (they write those layers' KV rows).
  int32_t exit_layer = 0;
  // LoRA adapters per sequence (indexed like caches; absent, null or empty: the base alone).
  std::vector<const LoraSet*> loras;

  // Appends a run of tokens of sequence `seq_index` at consecutive positions from `start_pos`.
  void add_sequence_tokens(int32_t seq_index, const int32_t* ids, int64_t n, int32_t start_pos, bool logits_for_last,
                           bool logits_for_all = false);
};

class ModelRunner {
 public:
  ModelRunner(const Model& model, ThreadPool& pool);

  // Runs the batch; logits gets one row of n_vocab floats per entry of batch.logit_tokens
  // (of n_embd floats, the normed hidden states, with batch.hidden_states).
  Status forward(const Batch& batch, std::vector<float>& logits);

  // Per-op time of the forward passes, while profile().set_enabled(true).
  OpProfile& profile() { return profile_; }
  const OpProfile& profile() const { return profile_; }

 private:
  Status validate(const Batch& batch) const;
  void ensure_buffers(int64_t n_tokens);
  void attention_layer(const Batch& batch, int64_t il, OpTimer& timer);
  AttentionShape attention_shape() const;
  int64_t plan_attention_tiles(const Batch& batch);
  void add_residual_and_norm(int64_t n_tokens, const Vec* norm);
  void norm_branch_output(int64_t n_tokens, const Vec& norm);
  void add_loras(int64_t layer, LoraTarget target, const float* x, float* y) {
    if (!lora_groups_.empty()) apply_loras(pool_, lora_groups_, layer, target, x, y, lora_scratch_);
  }

  const Model& model_;
  const ModelSpec& spec_;
  ThreadPool& pool_;
  int64_t capacity_ = 0;
  // Activations, [T, width] row-major.
  std::vector<float> x_;       // residual stream [T, n_embd]
  std::vector<float> xn_;      // normed input [T, n_embd]
  std::vector<float> q_;       // [T, q_dim]
  std::vector<float> k_;       // [T, kv_dim]
  std::vector<float> v_;       // [T, v_dim]
  std::vector<float> attn_;    // [T, n_head * head_dim_v]
  std::vector<float> proj_;    // [T, n_embd]
  std::vector<float> gate_;    // [T, n_ff]
  std::vector<float> up_;      // [T, n_ff]
  std::vector<float> out_in_;  // normed rows that need logits [n_out, n_embd]
  std::vector<float> attn_scratch_;
  std::vector<int32_t> tile_start_;  // attention tiles of the current batch
  std::vector<double> rope_inv_freq_;
  OpProfile profile_;                   // per pool thread: attention_scratch_floats
  std::vector<LoraGroup> lora_groups_;  // of the current batch
  std::vector<float> lora_scratch_;
};

}  // namespace autoglm
