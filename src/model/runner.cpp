#include "model/runner.h"

#include <cmath>

#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"

namespace autoglm {
namespace {

void add_bias(float* y, const Vec& bias, int64_t n_tokens) {
  if (bias.empty()) return;
  const int64_t n = int64_t(bias.size());
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t i = 0; i < n; ++i) y[t * n + i] += bias[size_t(i)];
}

void grow(std::vector<float>& v, int64_t n) {
  if (int64_t(v.size()) < n) v.resize(size_t(n));
}

}  // namespace

void Batch::add_sequence_tokens(int32_t seq_index, const int32_t* ids, int64_t n, int32_t start_pos,
                                bool logits_for_last, bool logits_for_all) {
  for (int64_t i = 0; i < n; ++i) {
    if (logits_for_all || (logits_for_last && i == n - 1)) logit_tokens.push_back(int32_t(tokens.size()));
    tokens.push_back(ids[i]);
    positions.push_back(start_pos + int32_t(i));
    seq.push_back(seq_index);
  }
}

ModelRunner::ModelRunner(const Model& model, ThreadPool& pool)
    : model_(model),
      spec_(model.spec()),
      pool_(pool),
      attn_scratch_(size_t(pool.size() * attention_scratch_floats(attention_shape()))),
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

// The tiles of a prompt attend to ever more positions; the threads take equal runs of work
// units, so the tiles go first, last, second, second to last, ... to even out their costs.
static int64_t balanced_tile_order(int64_t i, int64_t n_tiles) {
  return i % 2 == 0 ? i / 2 : n_tiles - 1 - i / 2;
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
  if (b.exit_layer < 0 || b.exit_layer > spec_.n_layer)
    return invalid_argument("batch: exit_layer " + std::to_string(b.exit_layer) + " is outside [0, " +
                            std::to_string(spec_.n_layer) + "]");
  return Status::ok();
}

void ModelRunner::ensure_buffers(int64_t T) {
  if (T <= capacity_) return;
  const ModelSpec& s = spec_;
  grow(x_, T * s.n_embd);
  grow(xn_, T * s.n_embd);
  grow(q_, T * s.q_dim());
  grow(k_, T * s.kv_dim());
  grow(v_, T * s.v_dim());
  grow(attn_, T * s.n_head * s.head_dim_v);
  grow(proj_, T * s.n_embd);
  grow(gate_, T * s.n_ff);
  grow(up_, T * s.n_ff);
  grow(out_in_, T * s.n_embd);
  if (int64_t(tile_start_.size()) < T + 1) tile_start_.resize(size_t(T + 1));
  capacity_ = T;
}

void ModelRunner::attention_layer(const Batch& b, int64_t il, OpTimer& timer) {
  const ModelSpec& s = spec_;
  const LayerWeights& lw = model_.weights().layers[size_t(il)];
  const int64_t T = int64_t(b.tokens.size());

  timer.mark(Op::kQkvProjection);
  const cpu::WeightMatrix* qkv[] = {&lw.wq, &lw.wk, &lw.wv};
  float* qkv_out[] = {q_.data(), k_.data(), v_.data()};
  cpu::matmul_multi(pool_, qkv, qkv_out, 3, xn_.data(), T);
  add_loras(il, LoraTarget::kQ, xn_.data(), q_.data());
  add_loras(il, LoraTarget::kK, xn_.data(), k_.data());
  add_loras(il, LoraTarget::kV, xn_.data(), v_.data());
  add_bias(q_.data(), lw.bq, T);
  add_bias(k_.data(), lw.bk, T);
  add_bias(v_.data(), lw.bv, T);

  for (int64_t t = 0; t < T; ++t) {
    float* q = &q_[t * s.q_dim()];
    float* k = &k_[t * s.kv_dim()];
    if (s.qk_norm) {
      for (int64_t h = 0; h < s.n_head; ++h)
        cpu::rmsnorm(q + h * s.head_dim, lw.q_norm.data(), s.rms_eps, s.head_dim, q + h * s.head_dim);
      for (int64_t h = 0; h < s.n_head_kv; ++h)
        cpu::rmsnorm(k + h * s.head_dim, lw.k_norm.data(), s.rms_eps, s.head_dim, k + h * s.head_dim);
    }
    const float pos = float(b.positions[size_t(t)]);
    cpu::rope(q, int(s.n_head), int(s.head_dim), int(s.n_rot), pos, rope_inv_freq_.data(), s.rope_style);
    cpu::rope(k, int(s.n_head_kv), int(s.head_dim), int(s.n_rot), pos, rope_inv_freq_.data(), s.rope_style);
  }
  timer.mark(Op::kAttentionCore);
  for (int64_t t = 0; t < T; ++t) {
    const float* k = &k_[t * s.kv_dim()];
    KvCache* cache = b.caches[size_t(b.seq[size_t(t)])];
    const DType kv_type = cache->format().type;
    cpu::encode_kv_row(kv_type, k, cache->key_row(il, b.positions[size_t(t)]), s.kv_dim());
    cpu::encode_kv_row(kv_type, &v_[t * s.v_dim()], cache->value_row(il, b.positions[size_t(t)]), s.v_dim());
  }

  const AttentionShape shape = attention_shape();
  const int64_t scratch_floats = attention_scratch_floats(shape);
  const int64_t n_tiles = plan_attention_tiles(b);
  pool_.parallel_for(n_tiles * s.n_head_kv, [&](int thread, int64_t w0, int64_t w1) {
    float* scratch = attn_scratch_.data() + thread * scratch_floats;
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t tile = balanced_tile_order(w / s.n_head_kv, n_tiles), g = w % s.n_head_kv;
      const int64_t t = tile_start_[size_t(tile)];
      KvCache* cache = b.caches[size_t(b.seq[size_t(t)])];
      const AttentionTile at{&q_[t * s.q_dim() + g * shape.group * s.head_dim],
                             s.q_dim(),
                             &attn_[t * s.n_head * s.head_dim_v + g * shape.group * s.head_dim_v],
                             s.n_head * s.head_dim_v,
                             tile_start_[size_t(tile + 1)] - t,
                             b.positions[size_t(t)] + 1};
      attend_tile(*cache, il, g, at, shape, cpu::kv_row_ops(cache->format().type), scratch);
    }
  });

  timer.mark(Op::kOutputProjection);
  cpu::matmul(pool_, lw.wo, attn_.data(), T, proj_.data());
  add_loras(il, LoraTarget::kO, attn_.data(), proj_.data());
  norm_branch_output(T, lw.attn_post_norm);
}

// Architectures with post norms (glm4) normalize a branch's output before the residual add.
void ModelRunner::norm_branch_output(int64_t T, const Vec& norm) {
  if (norm.empty()) return;
  for (int64_t t = 0; t < T; ++t)
    cpu::rmsnorm(&proj_[t * spec_.n_embd], norm.data(), spec_.rms_eps, spec_.n_embd, &proj_[t * spec_.n_embd]);
}

// x += proj (the residual), and xn = rmsnorm(x) * norm in the same pass over each row
// (norm null: only the residual add).
void ModelRunner::add_residual_and_norm(int64_t T, const Vec* norm) {
  const ModelSpec& s = spec_;
  for (int64_t t = 0; t < T; ++t) {
    float* x = &x_[t * s.n_embd];
    if (norm)
      cpu::add_rmsnorm(x, &proj_[t * s.n_embd], norm->data(), s.rms_eps, s.n_embd, &xn_[t * s.n_embd]);
    else
      for (int64_t i = 0; i < s.n_embd; ++i) x[i] += proj_[t * s.n_embd + i];
  }
}

Status ModelRunner::forward(const Batch& b, std::vector<float>& logits) {
  AUTOGLM_RETURN_IF_ERROR(validate(b));
  const ModelSpec& s = spec_;
  const ModelWeights& w = model_.weights();
  const int64_t T = int64_t(b.tokens.size());
  if (T == 0) {
    logits.clear();
    return Status::ok();
  }
  ensure_buffers(T);
  lora_groups_ = b.loras.empty() ? std::vector<LoraGroup>{} : group_by_adapter(b.seq, b.loras);
  profile_.add_tokens(T);
  OpTimer timer(profile_, Op::kEmbedding);

  for (int64_t t = 0; t < T; ++t) {
    cpu::dequantize_row(w.token_embd, b.tokens[size_t(t)], &x_[t * s.n_embd]);
    cpu::rmsnorm(&x_[t * s.n_embd], w.layers[0].attn_norm.data(), s.rms_eps, s.n_embd, &xn_[t * s.n_embd]);
  }

  const int64_t n_run = b.exit_layer > 0 ? b.exit_layer : s.n_layer;
  for (int64_t il = 0; il < n_run; ++il) {
    const LayerWeights& lw = w.layers[size_t(il)];
    attention_layer(b, il, timer);
    add_residual_and_norm(T, &lw.ffn_norm);
    timer.mark(Op::kFfn);
    const cpu::WeightMatrix* gate_up[] = {&lw.gate, &lw.up};
    float* gate_up_out[] = {gate_.data(), up_.data()};
    cpu::matmul_multi(pool_, gate_up, gate_up_out, 2, xn_.data(), T);
    add_loras(il, LoraTarget::kGate, xn_.data(), gate_.data());
    add_loras(il, LoraTarget::kUp, xn_.data(), up_.data());
    cpu::silu_mul(gate_.data(), up_.data(), T * s.n_ff);
    cpu::matmul(pool_, lw.down, gate_.data(), T, proj_.data());
    add_loras(il, LoraTarget::kDown, gate_.data(), proj_.data());
    norm_branch_output(T, lw.ffn_post_norm);
    add_residual_and_norm(T, il + 1 < n_run ? &w.layers[size_t(il + 1)].attn_norm : nullptr);
  }

  timer.mark(Op::kLogits);
  const int64_t n_out = int64_t(b.logit_tokens.size());
  for (int64_t o = 0; o < n_out; ++o)
    cpu::rmsnorm(&x_[b.logit_tokens[size_t(o)] * s.n_embd], w.output_norm.data(), s.rms_eps, s.n_embd,
                 &out_in_[o * s.n_embd]);
  if (b.hidden_states) {
    logits.assign(out_in_.begin(), out_in_.begin() + n_out * s.n_embd);
    return Status::ok();
  }
  logits.resize(size_t(n_out * s.n_vocab));
  cpu::matmul(pool_, w.output, out_in_.data(), n_out, logits.data());
  return Status::ok();
}

}  // namespace autoglm
