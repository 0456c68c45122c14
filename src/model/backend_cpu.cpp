#include "model/backend_cpu.h"

#include <algorithm>

#include "core/parallel_rows.h"
#include "kernels/cpu/kv_rows.h"
#include "model/expert_routing.h"

namespace autoglm {
namespace {

// The tiles of a prompt attend to ever more positions; the threads take equal runs of work
// units, so the tiles go first, last, second, second to last, ... to even out their costs.
int64_t balanced_tile_order(int64_t i, int64_t n_tiles) {
  return i % 2 == 0 ? i / 2 : n_tiles - 1 - i / 2;
}

}  // namespace

Status CpuBackend::begin_step(const Batch& batch, const int32_t* tile_start, int64_t n_tiles) {
  batch_ = &batch;
  tile_start_ = tile_start;
  n_tiles_ = n_tiles;
  return Status::ok();
}

void CpuBackend::embed(const cpu::WeightMatrix& table, float* x) {
  const int64_t T = int64_t(batch_->tokens.size());
  for (int64_t t = 0; t < T; ++t) cpu::dequantize_row(table, batch_->tokens[size_t(t)], x + t * table.cols);
}

void CpuBackend::matmul(const cpu::WeightMatrix& w, const float* x, int64_t n_rows, float* y) {
  cpu::matmul(pool_, w, x, n_rows, y);
}

void CpuBackend::matmul_multi(const cpu::WeightMatrix* const* ws, float* const* ys, int n, const float* x,
                              int64_t n_rows) {
  cpu::matmul_multi(pool_, ws, ys, n, x, n_rows);
}

// The per-row ops below run on the calling thread while small (a decode of one token, but for a
// very wide activation), and over the pool's threads in prefill and large batches (for_rows), where
// they had left the other threads waiting.
void CpuBackend::add_bias(float* y, const Vec& bias, int64_t n_rows) {
  const int64_t n = int64_t(bias.size());
  for_rows(pool_, n_rows, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t i = 0; i < n; ++i) y[r * n + i] += bias[size_t(i)];
  });
}

void CpuBackend::rmsnorm(const float* x, const Vec& w, float eps, int64_t width, int64_t n_rows, float* y) {
  for_rows(pool_, n_rows, width, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) cpu::rmsnorm(x + r * width, w.data(), eps, width, y + r * width);
  });
}

void CpuBackend::add_rmsnorm(float* x, const float* delta, const Vec* w, float eps, int64_t width, int64_t n_rows,
                             float* y) {
  for_rows(pool_, n_rows, width, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* row = x + r * width;
      if (w)
        cpu::add_rmsnorm(row, delta + r * width, w->data(), eps, width, y + r * width);
      else
        for (int64_t i = 0; i < width; ++i) row[i] += delta[r * width + i];
    }
  });
}

void CpuBackend::rmsnorm_logit_rows(const float* x, const Vec& w, float eps, int64_t width, float* y) {
  const std::vector<int32_t>& rows = batch_->logit_tokens;
  for (size_t i = 0; i < rows.size(); ++i)
    cpu::rmsnorm(x + rows[i] * width, w.data(), eps, width, y + int64_t(i) * width);
}

void CpuBackend::rope(float* x, int64_t n_heads, const RopeTable& rope) {
  const int64_t T = int64_t(batch_->tokens.size()), width = n_heads * rope.head_dim;
  const std::vector<int32_t>& grid = batch_->rope_positions;
  if (!rope.pair_axes || grid.empty()) {
    for_rows(pool_, T, width, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        cpu::rope(x + t * width, int(n_heads), int(rope.head_dim), int(rope.n_rot), float(batch_->positions[size_t(t)]),
                  rope.inv_freq, rope.style, rope.mscale);
    });
    return;
  }
  for_rows(pool_, T, width, [&](int64_t t0, int64_t t1) {
    std::vector<float> pair_pos(size_t(rope.n_rot / 2));  // M-RoPE: each pair at its axis's position
    for (int64_t t = t0; t < t1; ++t) {
      for (size_t i = 0; i < pair_pos.size(); ++i) pair_pos[i] = float(grid[size_t(3 * t + rope.pair_axes[i])]);
      cpu::rope_pairs(x + t * width, int(n_heads), int(rope.head_dim), int(rope.n_rot), pair_pos.data(), rope.inv_freq,
                      rope.style, rope.mscale);
    }
  });
}

void CpuBackend::silu_mul(float* gate, const float* up, int64_t n) {
  for_elements(pool_, n, [&](int64_t b, int64_t e) { cpu::silu_mul(gate + b, up + b, e - b); });
}

void CpuBackend::activation(const ModelSpec& spec, float* gate, const float* up, int64_t n) {
  for_elements(pool_, n, [&](int64_t b, int64_t e) { apply_activation(spec, gate + b, up + b, e - b); });
}

void CpuBackend::experts(const ExpertWeights& w, const ModelSpec& spec, float* router_logits, const float* x,
                         float* y) {
  const MoeSpec& m = spec.moe;
  const int64_t T = int64_t(batch_->tokens.size());
  route_layer(m, router_logits, w.router_bias, w.selection_bias, T, expert_ids_, expert_weights_, &pool_);
  run_experts(pool_, w, spec, x, T, expert_ids_.data(), expert_weights_.data(), y, expert_scratch_);
}

void CpuBackend::copy_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t width,
                           int64_t n_rows) {
  for (int64_t r = 0; r < n_rows; ++r)
    std::copy(src + r * src_stride, src + r * src_stride + width, dst + r * dst_stride);
}

void CpuBackend::store_kv(int64_t layer, const float* k, int64_t kv_dim, const float* v, int64_t v_dim) {
  const Batch& b = *batch_;
  // Each token writes its own rows (its sequence's cache, its position).
  for_rows(pool_, int64_t(b.tokens.size()), kv_dim + v_dim, [&](int64_t t0, int64_t t1) {
    for (size_t t = size_t(t0); t < size_t(t1); ++t) {
      KvCache* cache = b.caches[size_t(b.seq[t])];
      const DType type = cache->format().type;
      cpu::encode_kv_row(type, k + int64_t(t) * kv_dim, cache->key_row(layer, b.positions[t]), kv_dim);
      if (!cache->format().values_in_keys)  // else the key row's latent is the value
        cpu::encode_kv_row(type, v + int64_t(t) * v_dim, cache->value_row(layer, b.positions[t]), v_dim);
    }
  });
}

void CpuBackend::attention(int64_t layer, const float* q, int64_t q_stride, float* out, int64_t out_stride,
                           const AttentionShape& shape) {
  const Batch& b = *batch_;
  const int64_t scratch_floats = attention_scratch_floats(shape);
  const size_t scratch_size = size_t(pool_.size() * scratch_floats);
  if (attention_scratch_.size() < scratch_size) attention_scratch_.resize(scratch_size);
  const int64_t n_kv_heads = q_stride / (shape.group * shape.head_dim);
  pool_.parallel_for(n_tiles_ * n_kv_heads, [&](int thread, int64_t w0, int64_t w1) {
    float* scratch = attention_scratch_.data() + thread * scratch_floats;
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t tile = balanced_tile_order(w / n_kv_heads, n_tiles_), g = w % n_kv_heads;
      const int64_t t = tile_start_[tile];
      KvCache* cache = b.caches[size_t(b.seq[size_t(t)])];
      const AttentionTile at{q + t * q_stride + g * shape.group * shape.head_dim,
                             q_stride,
                             out + t * out_stride + g * shape.group * shape.head_dim_v,
                             out_stride,
                             tile_start_[tile + 1] - t,
                             b.positions[size_t(t)] + 1};
      attend_tile(*cache, layer, g, at, shape, cpu::kv_row_ops(cache->format().type), scratch);
    }
  });
}

Status CpuBackend::read_back(const float* src, int64_t n, float* dst) {
  if (src != dst) std::copy(src, src + n, dst);
  batch_ = nullptr;
  return Status::ok();
}

}  // namespace autoglm
