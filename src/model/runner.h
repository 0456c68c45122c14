// The forward pass over one ragged batch: the new tokens of one or more sequences,
// concatenated. Linear layers see one [T, d] matrix; attention reads each token's
// own sequence from its KV cache, positions 0..pos.
#pragma once

#include <cstdint>
#include <vector>

#include "autoglm/status.h"
#include "core/thread_pool.h"
#include "model/attention.h"
#include "model/backend.h"
#include "model/batch.h"
#include "model/device_memory.h"
#include "model/kv_cache.h"
#include "model/lora_apply.h"
#include "model/model.h"
#include "model/observing_backend.h"
#include "model/op_profile.h"

namespace autoglm {

class ModelRunner {
 public:
  // On the model's device (the CPU's ops on `pool`). A device that cannot run (no CUDA in
  // this build) makes every forward return the error.
  ModelRunner(const Model& model, ThreadPool& pool);

  // Runs the batch; logits gets one row of n_vocab floats per entry of batch.logit_tokens
  // (of n_embd floats, the normed hidden states, with batch.hidden_states).
  Status forward(const Batch& batch, std::vector<float>& logits);

  // Runs NextN block k (weights().nextn) over the batch: token t's input mixes its embedding with
  // hidden[t] (n_embd floats per token: the target's last layer before its output norm, or
  // the block's own output when drafting further). The batch's caches hold the NextN blocks'
  // layers only (block k at layer k). logits as forward's. The cpu only.
  Status forward_nextn(const Batch& batch, const float* hidden, int64_t k, std::vector<float>& logits);

  // The residual stream after the last layer of the latest pass, before the output norm: n_embd
  // floats for every token of that batch (what a NextN block takes as `hidden`). None after a pass
  // that was refused or failed: its rows are not another batch's to read.
  Status last_hidden(std::vector<float>& out);

  // From now on every weight matmul's input is shown to `observer` (which must outlive the
  // runner) before it runs: autoglm imatrix. The CPU only.
  void set_matmul_observer(MatmulObserver& observer);

  // Where the passes run (the model's device).
  const Device& device() const { return model_.device(); }

  // Per-op time of the forward passes, while profile().set_enabled(true).
  OpProfile& profile() { return profile_; }
  const OpProfile& profile() const { return profile_; }

 private:
  Status validate(const Batch& batch) const;
  Result<bool> start_pass(const Batch& batch, std::vector<float>& logits);
  Status ensure_buffers(int64_t n_tokens);
  Backend& backend() { return **backend_; }
  // Layer il's weights: the decoder's, or from n_layer on, a NextN block's (whose caches hold
  // the NextN layers only: cache_layer).
  const LayerWeights& layer_weights(int64_t il) const;
  int64_t cache_layer(int64_t il) const { return il < spec_.n_layer ? il : il - spec_.n_layer; }
  // Layer il on x_ (xn_ holds its normed input), leaving xn_ = rmsnorm(x_) * next_norm.
  void run_layer(const Batch& batch, int64_t il, const Vec* next_norm, OpTimer& timer);
  // The logits (or normed rows, batch.hidden_states) of the batch's logit tokens from x_.
  Status output_rows(const Batch& batch, const Vec& norm, const cpu::WeightMatrix& head, std::vector<float>& logits);
  // x_ = eh_proj [enorm(embedding) ; hnorm(hidden)], and xn_ its attention input.
  void place_embeddings(const Batch& batch);
  void nextn_input(const NextnWeights& w, const float* hidden, int64_t n_tokens);
  void attention_layer(const Batch& batch, int64_t il, OpTimer& timer);
  void latent_attention(int64_t il, int64_t n_tokens);
  void absorb_queries(const MlaWeights& w, int64_t n_tokens);
  void ffn_layer(int64_t il, int64_t n_tokens, OpTimer& timer);
  RopeTable rope_table(int64_t head_dim) const;
  AttentionShape attention_shape(int64_t il) const;
  int64_t plan_attention_tiles(const Batch& batch);
  Status check_rows_written_once(const Batch& batch, int64_t n_tiles);
  void add_residual_and_norm(int64_t n_tokens, const Vec* norm);
  void norm_branch_output(int64_t n_tokens, const Vec& norm);
  void add_loras(int64_t layer, LoraTarget target, const float* x, float* y) {
    if (!lora_groups_.empty()) apply_loras(pool_, lora_groups_, layer, target, x, y, lora_scratch_);
  }

  const Model& model_;
  const ModelSpec& spec_;
  ThreadPool& pool_;
  Result<std::unique_ptr<Backend>> backend_;
  int64_t capacity_ = 0;
  // Activations, [T, width] row-major, in the device's memory.
  DeviceMemory x_;       // residual stream [T, n_embd]
  DeviceMemory xn_;      // normed input [T, n_embd]
  DeviceMemory q_;       // [T, q_dim]
  DeviceMemory k_;       // [T, kv_dim]
  DeviceMemory v_;       // [T, v_dim]
  DeviceMemory attn_;    // [T, n_head * head_dim_v]
  DeviceMemory proj_;    // [T, n_embd]
  DeviceMemory gate_;    // [T, n_ff]
  DeviceMemory up_;      // [T, n_ff]
  DeviceMemory out_in_;  // normed rows that need logits [T, n_embd]
  DeviceMemory router_;  // mixture of experts: router logits [T, n_expert]
  // Latent attention: q before absorption [T, n_head * (qk_nope + n_rot)], q's low rank
  // [T, q_lora], [latent | k_pe] [T, kv_lora + n_rot], the rope parts [T, n_head * n_rot],
  // one head's rows in and out of its per-head matrices, and the heads' values [T, n_head * v_head].
  DeviceMemory mla_q_, mla_qa_, mla_kv_, mla_pe_, mla_head_in_, mla_head_out_, mla_values_;
  DeviceMemory logits_;              // [T, n_vocab]
  DeviceMemory nextn_in_;            // NextN blocks: [enorm(embedding) | hnorm(hidden)] [T, 2 * n_embd]
  int64_t last_tokens_ = 0;          // tokens of the latest pass (rows of x_ that last_hidden reads)
  std::vector<int32_t> tile_start_;  // attention tiles of the current batch
  std::vector<int32_t> tile_order_;  // the tiles by cache and position (check_rows_written_once)
  std::vector<double> rope_inv_freq_;
  std::vector<uint8_t> rope_pair_axes_;  // M-RoPE (spec.rope_pair_axes())
  OpProfile profile_;
  std::vector<LoraGroup> lora_groups_;  // of the current batch
  std::vector<float> lora_scratch_;
};

}  // namespace autoglm
