#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace autoglm {
namespace {

constexpr int64_t kChunk = 16;  // chunks start at multiples of 16, so results do not depend on the cache's spans

// Row pointers of one layer's keys or values, fetching a span's base only when a position leaves it.
class RowWalker {
 public:
  RowWalker(KvCache& cache, int64_t layer, bool keys)
      : cache_(cache),
        layer_(layer),
        keys_(keys),
        span_(cache.span()),
        row_bytes_(keys ? cache.format().k_row_bytes : cache.format().v_row_bytes) {}

  const uint8_t* row(int64_t pos) {
    if (!base_ || pos < first_ || pos >= first_ + span_) {
      first_ = pos - pos % span_;
      base_ = keys_ ? cache_.key_span(layer_, first_) : cache_.value_span(layer_, first_);
    }
    return base_ + (pos - first_) * row_bytes_;
  }

 private:
  KvCache& cache_;
  int64_t layer_;
  bool keys_;
  int64_t span_, row_bytes_;
  int64_t first_ = -1;
  const uint8_t* base_ = nullptr;
};

}  // namespace

int64_t attention_scratch_floats(const AttentionShape& s) {
  return s.group * (kChunk + 2);
}

void attend_group(KvCache& cache, int64_t layer, int64_t kv_head, const float* q, int64_t n_pos,
                  const AttentionShape& s, const cpu::KvRowOps& ops, float* scratch, float* out) {
  float* scores = scratch;                         // [group][kChunk]
  float* running_max = scores + s.group * kChunk;  // [group]
  float* running_sum = running_max + s.group;      // [group]
  const int64_t k_offset = kv_head * cache.format().k_head_bytes;
  const int64_t v_offset = kv_head * cache.format().v_head_bytes;
  std::fill(out, out + s.group * s.head_dim_v, 0.0f);
  std::fill(running_max, running_max + s.group, -std::numeric_limits<float>::infinity());
  std::fill(running_sum, running_sum + s.group, 0.0f);
  RowWalker keys(cache, layer, true), values(cache, layer, false);

  for (int64_t c0 = 0; c0 < n_pos; c0 += kChunk) {
    const int64_t n = std::min(kChunk, n_pos - c0);
    for (int64_t j = 0; j < n; ++j) {
      const uint8_t* k = keys.row(c0 + j) + k_offset;
      for (int64_t h = 0; h < s.group; ++h)
        scores[h * kChunk + j] = ops.dot(k, q + h * s.head_dim, s.head_dim) * s.scale;
    }
    for (int64_t h = 0; h < s.group; ++h) {
      float* sh = scores + h * kChunk;
      const float new_max = std::max(running_max[h], *std::max_element(sh, sh + n));
      const float correction = std::exp(running_max[h] - new_max);  // 0 on the first chunk
      if (correction != 1.0f) {
        float* acc = out + h * s.head_dim_v;
        for (int64_t d = 0; d < s.head_dim_v; ++d) acc[d] *= correction;
      }
      float sum = running_sum[h] * correction;
      for (int64_t j = 0; j < n; ++j) {
        sh[j] = std::exp(sh[j] - new_max);
        sum += sh[j];
      }
      running_sum[h] = sum;
      running_max[h] = new_max;
    }
    for (int64_t j = 0; j < n; ++j) {
      const uint8_t* v = values.row(c0 + j) + v_offset;
      for (int64_t h = 0; h < s.group; ++h) ops.axpy(v, scores[h * kChunk + j], out + h * s.head_dim_v, s.head_dim_v);
    }
  }
  for (int64_t h = 0; h < s.group; ++h) {
    const float inv = running_sum[h] > 0 ? 1.0f / running_sum[h] : 0.0f;
    for (int64_t d = 0; d < s.head_dim_v; ++d) out[h * s.head_dim_v + d] *= inv;
  }
}

}  // namespace autoglm
