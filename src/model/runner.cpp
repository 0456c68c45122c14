#include "model/runner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>

#include "model/make_backend.h"

namespace autoglm {

ModelRunner::ModelRunner(const Model& model, ThreadPool& pool)
    : model_(model),
      spec_(model.spec()),
      pool_(pool),
      backend_(make_backend(model, pool)),
      rope_inv_freq_(spec_.rope_inv_freq()),
      rope_pair_axes_(spec_.rope_pair_axes()) {}

// Runs of consecutive positions of one sequence, at most kAttentionTileTokens long; their
// starts go to tile_start_ (with the end as the last entry). Returns the number of tiles.
int64_t ModelRunner::plan_attention_tiles(const Batch& b) {
  const int64_t T = int64_t(b.tokens.size());
  int64_t n = 0;
  for (int64_t t = 0; t < T; ++t) {
    const bool continues = t > 0 && b.seq[size_t(t)] == b.seq[size_t(t - 1)] &&
                           b.positions[size_t(t)] == b.positions[size_t(t - 1)] + 1 &&
                           t - tile_start_[size_t(n - 1)] < kAttentionTileTokens;
    if (!continues) tile_start_[size_t(n++)] = int32_t(t);
  }
  tile_start_[size_t(n)] = int32_t(T);
  return n;
}

// Two tokens of a batch that write one KV row (the same cache and position) would race in the
// row writes and leave attention's result to their order: refused. Tiles hold consecutive
// positions, so the tiles of a cache sorted by their first position must not overlap their
// neighbours. Sorts tile_order_ (no allocation once the largest batch has run).
Status ModelRunner::check_rows_written_once(const Batch& b, int64_t n_tiles) {
  const auto cache_of = [&](int32_t tile) { return b.caches[size_t(b.seq[size_t(tile_start_[size_t(tile)])])]; };
  const auto first = [&](int32_t tile) { return b.positions[size_t(tile_start_[size_t(tile)])]; };
  const auto last = [&](int32_t tile) { return b.positions[size_t(tile_start_[size_t(tile + 1)] - 1)]; };
  std::iota(tile_order_.begin(), tile_order_.begin() + n_tiles, 0);
  std::sort(tile_order_.begin(), tile_order_.begin() + n_tiles, [&](int32_t a, int32_t c) {
    return std::less<const KvCache*>()(cache_of(a), cache_of(c)) || (cache_of(a) == cache_of(c) && first(a) < first(c));
  });
  for (int64_t i = 1; i < n_tiles; ++i) {
    const int32_t before = tile_order_[size_t(i - 1)], after = tile_order_[size_t(i)];
    if (cache_of(before) == cache_of(after) && first(after) <= last(before))
      return invalid_argument("batch: position " + std::to_string(first(after)) + " of sequence " +
                              std::to_string(b.seq[size_t(tile_start_[size_t(after)])]) +
                              " is written twice in one batch (one KV row, two tokens)");
  }
  return Status::ok();
}

const LayerWeights& ModelRunner::layer_weights(int64_t il) const {
  const ModelWeights& w = model_.weights();
  return il < spec_.n_layer ? w.layers[size_t(il)] : w.nextn[size_t(il - spec_.n_layer)].layer;
}

AttentionShape ModelRunner::attention_shape(int64_t il) const {
  const Vec& sinks = layer_weights(il).sinks;
  return {spec_.n_head / spec_.n_head_kv, spec_.head_dim,         spec_.head_dim_v,
          spec_.attention_scale(),        spec_.layer_window(il), sinks.empty() ? nullptr : sinks.data()};
}

RopeTable ModelRunner::rope_table(int64_t head_dim) const {
  return {rope_inv_freq_.data(), head_dim,          spec_.n_rot,
          spec_.rope_style,      spec_.rope_mscale, rope_pair_axes_.empty() ? nullptr : rope_pair_axes_.data()};
}

Status ModelRunner::validate(const Batch& b) const {
  const size_t n = b.tokens.size();
  if (b.positions.size() != n || b.seq.size() != n)
    return invalid_argument("batch: tokens, positions, seq differ in length");
  for (size_t i = 0; i < n; ++i) {
    if (b.tokens[i] < 0 || b.tokens[i] >= spec_.n_vocab)
      return invalid_argument("batch: token id " + std::to_string(b.tokens[i]) + " is outside the vocabulary of " +
                              std::to_string(spec_.n_vocab));
    if (b.seq[i] < 0 || size_t(b.seq[i]) >= b.caches.size() || !b.caches[size_t(b.seq[i])])
      return invalid_argument("batch: token " + std::to_string(i) + " names no KV cache");
    const KvCache* cache = b.caches[size_t(b.seq[i])];
    if (b.positions[i] < 0 || b.positions[i] >= cache->capacity())
      return out_of_range("batch: position " + std::to_string(b.positions[i]) + " is outside the context of " +
                          std::to_string(cache->capacity()) + " tokens");
  }
  for (size_t i = 0; i < b.logit_tokens.size(); ++i)
    if (b.logit_tokens[i] < 0 || size_t(b.logit_tokens[i]) >= n || (i && b.logit_tokens[i] <= b.logit_tokens[i - 1]))
      return invalid_argument("batch: logit_tokens must be ascending token indices");
  if (!b.loras.empty() && b.loras.size() != b.caches.size())
    return invalid_argument("batch: loras must hold one set per sequence (" + std::to_string(b.caches.size()) +
                            "), not " + std::to_string(b.loras.size()));
  if (!b.loras.empty() && device().kind != DeviceKind::kCpu)
    return unsupported("batch: LoRA adapters run on the cpu only, not on " + device_name(device()));
  if (!b.embeddings.empty() && b.embeddings.size() != n)
    return invalid_argument("batch: embeddings must hold one entry per token");
  if (!b.rope_positions.empty() && (b.rope_positions.size() != 3 * n || !spec_.mrope()))
    return invalid_argument(spec_.mrope() ? "batch: rope_positions must hold 3 per token"
                                          : "batch: rope_positions given to a model without M-RoPE");
  if ((!b.embeddings.empty() || !b.rope_positions.empty()) && device().kind != DeviceKind::kCpu)
    return unsupported("batch: image embeddings run on the cpu only, not on " + device_name(device()));
  if (b.exit_layer < 0 || b.exit_layer > spec_.n_layer)
    return invalid_argument("batch: exit_layer " + std::to_string(b.exit_layer) + " is outside [0, " +
                            std::to_string(spec_.n_layer) + "]");
  return Status::ok();
}

// Grows the activations to T tokens (never shrinks them: a pass allocates nothing once the
// largest step has run).
Status ModelRunner::ensure_buffers(int64_t T) {
  if (T <= capacity_) return Status::ok();
  const ModelSpec& s = spec_;
  const Device device = backend().device();
  const auto make = [&](DeviceMemory& m, int64_t floats) -> Status {
    AUTOGLM_ASSIGN_OR_RETURN(m, DeviceMemory::allocate(device, floats * int64_t(sizeof(float))));
    return Status::ok();
  };
  AUTOGLM_RETURN_IF_ERROR(make(x_, T * s.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make(xn_, T * s.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make(q_, T * s.q_dim()));
  AUTOGLM_RETURN_IF_ERROR(make(k_, T * s.kv_dim()));
  AUTOGLM_RETURN_IF_ERROR(make(v_, T * s.v_dim()));
  AUTOGLM_RETURN_IF_ERROR(make(attn_, T * s.n_head * s.head_dim_v));
  AUTOGLM_RETURN_IF_ERROR(make(proj_, T * s.n_embd));
  const int64_t ffn_width = std::max(s.n_ff, s.moe.n_ff_shexp);
  AUTOGLM_RETURN_IF_ERROR(make(gate_, T * ffn_width));
  AUTOGLM_RETURN_IF_ERROR(make(up_, T * ffn_width));
  AUTOGLM_RETURN_IF_ERROR(make(out_in_, T * s.n_embd));
  if (!model_.weights().nextn.empty()) AUTOGLM_RETURN_IF_ERROR(make(nextn_in_, T * 2 * s.n_embd));
  if (s.moe.enabled()) AUTOGLM_RETURN_IF_ERROR(make(router_, T * s.moe.n_expert));
  if (s.mla.enabled()) {
    const MlaSpec& m = s.mla;
    AUTOGLM_RETURN_IF_ERROR(make(mla_q_, T * s.n_head * (m.qk_nope + s.n_rot)));
    AUTOGLM_RETURN_IF_ERROR(make(mla_qa_, T * std::max<int64_t>(1, m.q_lora_rank)));
    AUTOGLM_RETURN_IF_ERROR(make(mla_kv_, T * (m.kv_lora_rank + s.n_rot)));
    AUTOGLM_RETURN_IF_ERROR(make(mla_pe_, T * s.n_head * s.n_rot));
    AUTOGLM_RETURN_IF_ERROR(make(mla_head_in_, T * std::max(m.qk_nope, m.kv_lora_rank)));
    AUTOGLM_RETURN_IF_ERROR(make(mla_head_out_, T * std::max(m.kv_lora_rank, m.v_head)));
    AUTOGLM_RETURN_IF_ERROR(make(mla_values_, T * s.n_head * m.v_head));
  }
  // The CPU writes logits straight into the caller's vector; a device needs its own rows.
  if (device.kind != DeviceKind::kCpu) AUTOGLM_RETURN_IF_ERROR(make(logits_, T * s.n_vocab));
  if (int64_t(tile_start_.size()) < T + 1) tile_start_.resize(size_t(T + 1));
  if (int64_t(tile_order_.size()) < T) tile_order_.resize(size_t(T));
  capacity_ = T;
  return Status::ok();
}

void ModelRunner::attention_layer(const Batch& b, int64_t il, OpTimer& timer) {
  const ModelSpec& s = spec_;
  const LayerWeights& lw = layer_weights(il);
  const int64_t T = int64_t(b.tokens.size());
  Backend& be = backend();
  float *q = q_.floats(), *k = k_.floats(), *v = v_.floats(), *xn = xn_.floats();

  timer.mark(Op::kQkvProjection);
  if (s.mla.enabled()) {
    latent_attention(il, T);
    timer.mark(Op::kOutputProjection);
    be.matmul(lw.wo, mla_values_.floats(), T, proj_.floats());
    add_loras(il, LoraTarget::kO, mla_values_.floats(), proj_.floats());
    return;
  }
  const cpu::WeightMatrix* qkv[] = {&lw.wq, &lw.wk, &lw.wv};
  float* qkv_out[] = {q, k, v};
  be.matmul_multi(qkv, qkv_out, 3, xn, T);
  add_loras(il, LoraTarget::kQ, xn, q);
  add_loras(il, LoraTarget::kK, xn, k);
  add_loras(il, LoraTarget::kV, xn, v);
  if (!lw.bq.empty()) be.add_bias(q, lw.bq, T);
  if (!lw.bk.empty()) be.add_bias(k, lw.bk, T);
  if (!lw.bv.empty()) be.add_bias(v, lw.bv, T);
  if (!lw.q_norm.empty()) {
    be.rmsnorm(q, lw.q_norm, s.rms_eps, s.head_dim, T * s.n_head, q);
    be.rmsnorm(k, lw.k_norm, s.rms_eps, s.head_dim, T * s.n_head_kv, k);
  }
  const RopeTable rope = rope_table(s.head_dim);
  be.rope(q, s.n_head, rope);
  be.rope(k, s.n_head_kv, rope);

  timer.mark(Op::kAttentionCore);
  be.store_kv(cache_layer(il), k, s.kv_dim(), v, s.v_dim());
  be.attention(cache_layer(il), q, s.q_dim(), attn_.floats(), s.n_head * s.head_dim_v, attention_shape(il));

  timer.mark(Op::kOutputProjection);
  be.matmul(lw.wo, attn_.floats(), T, proj_.floats());
  add_loras(il, LoraTarget::kO, attn_.floats(), proj_.floats());
  if (!lw.bo.empty()) be.add_bias(proj_.floats(), lw.bo, T);
  norm_branch_output(T, lw.attn_post_norm);
}

// Multi-head latent attention in its absorbed form: every head attends over one shared
// cached head [c | k_pe] (c the normed latent, k_pe the rotated key part), its query
// [k_b^T q_nope | q_pe]; the latent result goes through v_b into the head's values.
void ModelRunner::latent_attention(int64_t il, int64_t T) {
  const ModelSpec& s = spec_;
  const MlaSpec& m = s.mla;
  const MlaWeights& w = layer_weights(il).mla;
  Backend& be = backend();
  const int64_t q_head = m.qk_nope + s.n_rot, kv_width = m.kv_lora_rank + s.n_rot;
  float *xn = xn_.floats(), *q = mla_q_.floats(), *kv = mla_kv_.floats(), *pe = mla_pe_.floats();
  if (m.q_lora_rank > 0) {
    be.matmul(w.q_a, xn, T, mla_qa_.floats());
    be.rmsnorm(mla_qa_.floats(), w.q_a_norm, s.rms_eps, m.q_lora_rank, T, mla_qa_.floats());
    be.matmul(w.q_b, mla_qa_.floats(), T, q);
  } else {
    be.matmul(w.q, xn, T, q);
  }
  be.matmul(w.kv_a, xn, T, kv);
  // Keys [c | k_pe] into k_, values c into v_: the cache stores the latent, not per-head K/V.
  float *k = k_.floats(), *v = v_.floats();
  be.copy_rows(kv, kv_width, v, m.kv_lora_rank, m.kv_lora_rank, T);
  be.rmsnorm(v, w.kv_a_norm, s.rms_eps, m.kv_lora_rank, T, v);
  be.copy_rows(kv + m.kv_lora_rank, kv_width, pe, s.n_rot, s.n_rot, T);
  be.rope(pe, 1, rope_table(s.n_rot));
  be.copy_rows(v, m.kv_lora_rank, k, kv_width, m.kv_lora_rank, T);
  be.copy_rows(pe, s.n_rot, k + m.kv_lora_rank, kv_width, s.n_rot, T);
  be.store_kv(cache_layer(il), k, s.kv_dim(), v, s.v_dim());
  // The queries' rope parts, all heads at once.
  be.copy_rows(q + m.qk_nope, q_head, pe, s.n_rot, s.n_rot, T * s.n_head);
  be.rope(pe, s.n_head, rope_table(s.n_rot));
  absorb_queries(w, T);
  be.attention(cache_layer(il), q_.floats(), s.q_dim(), attn_.floats(), s.n_head * m.kv_lora_rank, attention_shape(il));
  for (int64_t h = 0; h < s.n_head; ++h) {
    be.copy_rows(attn_.floats() + h * m.kv_lora_rank, s.n_head * m.kv_lora_rank, mla_head_in_.floats(), m.kv_lora_rank,
                 m.kv_lora_rank, T);
    be.matmul(w.v_b[size_t(h)], mla_head_in_.floats(), T, mla_head_out_.floats());
    be.copy_rows(mla_head_out_.floats(), m.v_head, mla_values_.floats() + h * m.v_head, s.n_head * m.v_head, m.v_head,
                 T);
  }
}

// q_ [T, n_head, kv_lora + n_rot] = per head [k_b_h q_nope_h | q_pe_h].
void ModelRunner::absorb_queries(const MlaWeights& w, int64_t T) {
  const ModelSpec& s = spec_;
  const MlaSpec& m = s.mla;
  Backend& be = backend();
  const int64_t q_head = m.qk_nope + s.n_rot;
  for (int64_t h = 0; h < s.n_head; ++h) {
    float* dst = q_.floats() + h * s.head_dim;
    be.copy_rows(mla_q_.floats() + h * q_head, s.n_head * q_head, mla_head_in_.floats(), m.qk_nope, m.qk_nope, T);
    be.matmul(w.k_b[size_t(h)], mla_head_in_.floats(), T, mla_head_out_.floats());
    be.copy_rows(mla_head_out_.floats(), m.kv_lora_rank, dst, s.q_dim(), m.kv_lora_rank, T);
    be.copy_rows(mla_pe_.floats() + h * s.n_rot, s.n_head * s.n_rot, dst + m.kv_lora_rank, s.q_dim(), s.n_rot, T);
  }
}

// The FFN of layer il on xn_ into proj_: dense SwiGLU, or the layer's experts.
void ModelRunner::ffn_layer(int64_t il, int64_t T, OpTimer& timer) {
  const LayerWeights& lw = layer_weights(il);
  Backend& be = backend();
  float* xn = xn_.floats();
  timer.mark(Op::kFfn);
  if (spec_.moe.is_moe_layer(il)) {
    be.matmul(lw.experts.router, xn, T, router_.floats());
    be.experts(lw.experts, spec_, router_.floats(), xn, proj_.floats());
    return;
  }
  float *gate = gate_.floats(), *up = up_.floats();
  const cpu::WeightMatrix* gate_up[] = {&lw.gate, &lw.up};
  float* gate_up_out[] = {gate, up};
  be.matmul_multi(gate_up, gate_up_out, 2, xn, T);
  add_loras(il, LoraTarget::kGate, xn, gate);
  add_loras(il, LoraTarget::kUp, xn, up);
  be.activation(spec_, gate, up, T * spec_.n_ff);
  be.matmul(lw.down, gate, T, proj_.floats());
  add_loras(il, LoraTarget::kDown, gate, proj_.floats());
}

// Architectures with post norms (glm4) normalize a branch's output before the residual add.
void ModelRunner::norm_branch_output(int64_t T, const Vec& norm) {
  if (norm.empty()) return;
  backend().rmsnorm(proj_.floats(), norm, spec_.rms_eps, spec_.n_embd, T, proj_.floats());
}

// x += proj (the residual), and xn = rmsnorm(x) * norm in the same pass over each row
// (norm null: only the residual add).
void ModelRunner::add_residual_and_norm(int64_t T, const Vec* norm) {
  backend().add_rmsnorm(x_.floats(), proj_.floats(), norm, spec_.rms_eps, spec_.n_embd, T, xn_.floats());
}

void ModelRunner::run_layer(const Batch& b, int64_t il, const Vec* next_norm, OpTimer& timer) {
  const LayerWeights& lw = layer_weights(il);
  const int64_t T = int64_t(b.tokens.size());
  attention_layer(b, il, timer);
  add_residual_and_norm(T, &lw.ffn_norm);
  ffn_layer(il, T, timer);
  norm_branch_output(T, lw.ffn_post_norm);
  add_residual_and_norm(T, next_norm);
}

Status ModelRunner::output_rows(const Batch& b, const Vec& norm, const cpu::WeightMatrix& head,
                                std::vector<float>& logits) {
  const ModelSpec& s = spec_;
  Backend& be = backend();
  last_tokens_ = int64_t(b.tokens.size());
  const int64_t n_out = int64_t(b.logit_tokens.size());
  be.rmsnorm_logit_rows(x_.floats(), norm, s.rms_eps, s.n_embd, out_in_.floats());
  if (b.hidden_states) {
    logits.resize(size_t(n_out * s.n_embd));
    return be.read_back(out_in_.floats(), n_out * s.n_embd, logits.data());
  }
  logits.resize(size_t(n_out * s.n_vocab));
  float* out = be.device().kind == DeviceKind::kCpu ? logits.data() : logits_.floats();
  be.matmul(head, out_in_.floats(), n_out, out);
  return be.read_back(out, n_out * s.n_vocab, logits.data());
}

void ModelRunner::set_matmul_observer(MatmulObserver& observer) {
  if (backend_) backend_ = observing_backend(std::move(*backend_), observer, pool_);
}

Status ModelRunner::last_hidden(std::vector<float>& out) {
  if (!backend_) return backend_.status();
  out.resize(size_t(last_tokens_ * spec_.n_embd));
  return last_tokens_ == 0 ? Status::ok() : backend().read_back(x_.floats(), last_tokens_ * spec_.n_embd, out.data());
}

// What every pass does first: the batch checked, the buffers grown, the backend told. False:
// an empty batch (no logits), nothing to run.
Result<bool> ModelRunner::start_pass(const Batch& b, std::vector<float>& logits) {
  last_tokens_ = 0;  // set again once this pass's rows are complete (output_rows)
  if (!backend_) return backend_.status();
  AUTOGLM_RETURN_IF_ERROR(validate(b));
  const int64_t T = int64_t(b.tokens.size());
  if (T == 0) {
    logits.clear();
    return false;
  }
  AUTOGLM_RETURN_IF_ERROR(ensure_buffers(T));
  const int64_t n_tiles = plan_attention_tiles(b);
  AUTOGLM_RETURN_IF_ERROR(check_rows_written_once(b, n_tiles));
  AUTOGLM_RETURN_IF_ERROR(backend().begin_step(b, tile_start_.data(), n_tiles));
  profile_.add_tokens(T);
  return true;
}

Status ModelRunner::forward(const Batch& b, std::vector<float>& logits) {
  AUTOGLM_ASSIGN_OR_RETURN(const bool run, start_pass(b, logits));
  if (!run) return Status::ok();
  const ModelSpec& s = spec_;
  const ModelWeights& w = model_.weights();
  const int64_t T = int64_t(b.tokens.size());
  Backend& be = backend();
  lora_groups_ = b.loras.empty() ? std::vector<LoraGroup>{} : group_by_adapter(b.seq, b.loras);
  OpTimer timer(profile_, Op::kEmbedding);

  be.embed(w.token_embd, x_.floats());
  place_embeddings(b);
  be.rmsnorm(x_.floats(), w.layers[0].attn_norm, s.rms_eps, s.n_embd, T, xn_.floats());

  const int64_t n_run = b.exit_layer > 0 ? b.exit_layer : s.n_layer;
  for (int64_t il = 0; il < n_run; ++il)
    run_layer(b, il, il + 1 < n_run ? &w.layers[size_t(il + 1)].attn_norm : nullptr, timer);

  timer.mark(Op::kLogits);
  return output_rows(b, w.output_norm, w.output, logits);
}

// An image's rows over its placeholder tokens' embeddings (host memory: the cpu only).
void ModelRunner::place_embeddings(const Batch& b) {
  for (size_t t = 0; t < b.embeddings.size(); ++t)
    if (const float* row = b.embeddings[t]) std::copy(row, row + spec_.n_embd, x_.floats() + int64_t(t) * spec_.n_embd);
}

// The two halves go side by side in nextn_in_ (rmsnorm writes packed rows), then one matmul.
void ModelRunner::nextn_input(const NextnWeights& w, const float* hidden, int64_t T) {
  const int64_t n = spec_.n_embd;
  Backend& be = backend();
  float *cat = nextn_in_.floats(), *x = x_.floats(), *xn = xn_.floats();
  be.embed(w.embed, xn);
  be.rmsnorm(xn, w.enorm, spec_.rms_eps, n, T, xn);
  be.copy_rows(xn, n, cat, 2 * n, n, T);
  std::copy(hidden, hidden + T * n, x);  // host memory: the cpu only
  be.rmsnorm(x, w.hnorm, spec_.rms_eps, n, T, xn);
  be.copy_rows(xn, n, cat + n, 2 * n, n, T);
  be.matmul(w.eh_proj, cat, T, x);
  be.rmsnorm(x, w.layer.attn_norm, spec_.rms_eps, n, T, xn);
}

Status ModelRunner::forward_nextn(const Batch& b, const float* hidden, int64_t k, std::vector<float>& logits) {
  last_tokens_ = 0;  // a refusal below leaves no rows for last_hidden, as start_pass's do
  if (!backend_) return backend_.status();
  const std::vector<NextnWeights>& blocks = model_.weights().nextn;
  if (k < 0 || k >= int64_t(blocks.size()))
    return invalid_argument("nextn: the model has " + std::to_string(blocks.size()) + " NextN blocks, not block " +
                            std::to_string(k));
  if (device().kind != DeviceKind::kCpu)
    return unsupported("nextn: NextN blocks run on the cpu only, not on " + device_name(device()));
  if (b.exit_layer != 0 || !b.loras.empty())
    return invalid_argument("nextn: a NextN batch takes no exit_layer and no LoRA adapters");
  AUTOGLM_ASSIGN_OR_RETURN(const bool run, start_pass(b, logits));
  if (!run) return Status::ok();
  const int64_t T = int64_t(b.tokens.size());
  lora_groups_.clear();
  OpTimer timer(profile_, Op::kEmbedding);
  const NextnWeights& w = blocks[size_t(k)];
  nextn_input(w, hidden, T);
  run_layer(b, spec_.n_layer + k, nullptr, timer);
  timer.mark(Op::kLogits);
  return output_rows(b, w.shared_head_norm, w.head, logits);
}

}  // namespace autoglm
