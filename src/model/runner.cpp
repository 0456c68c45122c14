#include "model/runner.h"

#include <cmath>

namespace autoglm {

ModelRunner::ModelRunner(const Model& model, ThreadPool& pool)
    : model_(model),
      spec_(model.spec()),
      pool_(pool),
      backend_(make_backend(model, pool)),
      rope_inv_freq_(spec_.rope_inv_freq()) {}

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

AttentionShape ModelRunner::attention_shape() const {
  return {spec_.n_head / spec_.n_head_kv, spec_.head_dim, spec_.head_dim_v, 1.0f / std::sqrt(float(spec_.head_dim)),
          spec_.sliding_window};
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
  AUTOGLM_RETURN_IF_ERROR(make(gate_, T * s.n_ff));
  AUTOGLM_RETURN_IF_ERROR(make(up_, T * s.n_ff));
  AUTOGLM_RETURN_IF_ERROR(make(out_in_, T * s.n_embd));
  // The CPU writes logits straight into the caller's vector; a device needs its own rows.
  if (device.kind != DeviceKind::kCpu) AUTOGLM_RETURN_IF_ERROR(make(logits_, T * s.n_vocab));
  if (int64_t(tile_start_.size()) < T + 1) tile_start_.resize(size_t(T + 1));
  capacity_ = T;
  return Status::ok();
}

void ModelRunner::attention_layer(const Batch& b, int64_t il, OpTimer& timer) {
  const ModelSpec& s = spec_;
  const LayerWeights& lw = model_.weights().layers[size_t(il)];
  const int64_t T = int64_t(b.tokens.size());
  Backend& be = backend();
  float *q = q_.floats(), *k = k_.floats(), *v = v_.floats(), *xn = xn_.floats();

  timer.mark(Op::kQkvProjection);
  const cpu::WeightMatrix* qkv[] = {&lw.wq, &lw.wk, &lw.wv};
  float* qkv_out[] = {q, k, v};
  be.matmul_multi(qkv, qkv_out, 3, xn, T);
  add_loras(il, LoraTarget::kQ, xn, q);
  add_loras(il, LoraTarget::kK, xn, k);
  add_loras(il, LoraTarget::kV, xn, v);
  if (!lw.bq.empty()) be.add_bias(q, lw.bq, T);
  if (!lw.bk.empty()) be.add_bias(k, lw.bk, T);
  if (!lw.bv.empty()) be.add_bias(v, lw.bv, T);
  if (s.qk_norm) {
    be.rmsnorm(q, lw.q_norm, s.rms_eps, s.head_dim, T * s.n_head, q);
    be.rmsnorm(k, lw.k_norm, s.rms_eps, s.head_dim, T * s.n_head_kv, k);
  }
  const RopeTable rope{rope_inv_freq_.data(), s.head_dim, s.n_rot, s.rope_style};
  be.rope(q, s.n_head, rope);
  be.rope(k, s.n_head_kv, rope);

  timer.mark(Op::kAttentionCore);
  be.store_kv(il, k, s.kv_dim(), v, s.v_dim());
  be.attention(il, q, s.q_dim(), attn_.floats(), s.n_head * s.head_dim_v, attention_shape());

  timer.mark(Op::kOutputProjection);
  be.matmul(lw.wo, attn_.floats(), T, proj_.floats());
  add_loras(il, LoraTarget::kO, attn_.floats(), proj_.floats());
  norm_branch_output(T, lw.attn_post_norm);
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

Status ModelRunner::forward(const Batch& b, std::vector<float>& logits) {
  if (!backend_) return backend_.status();
  AUTOGLM_RETURN_IF_ERROR(validate(b));
  const ModelSpec& s = spec_;
  const ModelWeights& w = model_.weights();
  const int64_t T = int64_t(b.tokens.size());
  if (T == 0) {
    logits.clear();
    return Status::ok();
  }
  AUTOGLM_RETURN_IF_ERROR(ensure_buffers(T));
  Backend& be = backend();
  AUTOGLM_RETURN_IF_ERROR(be.begin_step(b, tile_start_.data(), plan_attention_tiles(b)));
  lora_groups_ = b.loras.empty() ? std::vector<LoraGroup>{} : group_by_adapter(b.seq, b.loras);
  profile_.add_tokens(T);
  OpTimer timer(profile_, Op::kEmbedding);

  be.embed(w.token_embd, x_.floats());
  be.rmsnorm(x_.floats(), w.layers[0].attn_norm, s.rms_eps, s.n_embd, T, xn_.floats());

  const int64_t n_run = b.exit_layer > 0 ? b.exit_layer : s.n_layer;
  for (int64_t il = 0; il < n_run; ++il) {
    const LayerWeights& lw = w.layers[size_t(il)];
    attention_layer(b, il, timer);
    add_residual_and_norm(T, &lw.ffn_norm);
    timer.mark(Op::kFfn);
    float *gate = gate_.floats(), *up = up_.floats(), *xn = xn_.floats();
    const cpu::WeightMatrix* gate_up[] = {&lw.gate, &lw.up};
    float* gate_up_out[] = {gate, up};
    be.matmul_multi(gate_up, gate_up_out, 2, xn, T);
    add_loras(il, LoraTarget::kGate, xn, gate);
    add_loras(il, LoraTarget::kUp, xn, up);
    be.silu_mul(gate, up, T * s.n_ff);
    be.matmul(lw.down, gate, T, proj_.floats());
    add_loras(il, LoraTarget::kDown, gate, proj_.floats());
    norm_branch_output(T, lw.ffn_post_norm);
    add_residual_and_norm(T, il + 1 < n_run ? &w.layers[size_t(il + 1)].attn_norm : nullptr);
  }

  timer.mark(Op::kLogits);
  const int64_t n_out = int64_t(b.logit_tokens.size());
  be.rmsnorm_logit_rows(x_.floats(), w.output_norm, s.rms_eps, s.n_embd, out_in_.floats());
  if (b.hidden_states) {
    logits.resize(size_t(n_out * s.n_embd));
    return be.read_back(out_in_.floats(), n_out * s.n_embd, logits.data());
  }
  logits.resize(size_t(n_out * s.n_vocab));
  float* out = be.device().kind == DeviceKind::kCpu ? logits.data() : logits_.floats();
  be.matmul(w.output, out_in_.floats(), n_out, out);
  return be.read_back(out, n_out * s.n_vocab, logits.data());
}

}  // namespace autoglm
