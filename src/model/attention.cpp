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
  return kAttentionTileTokens * s.group * (kChunk + 2);
}

void attend_tile(KvCache& cache, int64_t layer, int64_t kv_head, const AttentionTile& tile, const AttentionShape& s,
                 const cpu::KvRowOps& ops, float* scratch) {
  const int64_t n_queries = tile.n_tokens * s.group;  // query qi = token i * group + head h
  float* scores = scratch;                            // [n_queries][kChunk]
  float* running_max = scores + n_queries * kChunk;   // [n_queries]
  float* running_sum = running_max + n_queries;       // [n_queries]
  auto query = [&](int64_t qi) { return tile.q + (qi / s.group) * tile.q_stride + (qi % s.group) * s.head_dim; };
  auto output = [&](int64_t qi) { return tile.out + (qi / s.group) * tile.out_stride + (qi % s.group) * s.head_dim_v; };
  auto limit = [&](int64_t qi) { return tile.first_n_pos + qi / s.group; };  // positions this query sees
  auto lower = [&](int64_t qi) { return s.window > 0 ? std::max<int64_t>(0, limit(qi) - s.window) : 0; };
  const int64_t k_offset = kv_head * cache.format().k_head_bytes;
  const int64_t v_offset = kv_head * cache.format().v_head_bytes;
  for (int64_t qi = 0; qi < n_queries; ++qi) std::fill(output(qi), output(qi) + s.head_dim_v, 0.0f);
  std::fill(running_max, running_max + n_queries, -std::numeric_limits<float>::infinity());
  std::fill(running_sum, running_sum + n_queries, 0.0f);
  RowWalker keys(cache, layer, true), values(cache, layer, false);

  const uint8_t* k_rows[kChunk];
  const uint8_t* v_rows[kChunk];
  const int64_t n_pos = limit(n_queries - 1);
  for (int64_t c0 = lower(0) - lower(0) % kChunk; c0 < n_pos; c0 += kChunk) {
    const int64_t n = std::min(kChunk, n_pos - c0);
    const int64_t skip = std::max<int64_t>(0, lower(0) - c0);  // before every window: never read
    for (int64_t j = skip; j < n; ++j) {
      k_rows[j] = keys.row(c0 + j) + k_offset;
      v_rows[j] = values.row(c0 + j) + v_offset;
    }
    for (int64_t qi = 0; qi < n_queries; ++qi) {
      const int64_t first = std::max<int64_t>(0, lower(qi) - c0);  // window start inside the chunk
      const int64_t seen = std::min(n, limit(qi) - c0) - first;
      if (seen <= 0) continue;  // outside this query's positions
      float* sq = scores + qi * kChunk;
      ops.scores(k_rows + first, seen, query(qi), s.head_dim, s.scale, sq);
      const float new_max = std::max(running_max[qi], *std::max_element(sq, sq + seen));
      const float correction = std::exp(running_max[qi] - new_max);  // 0 on the first chunk
      if (correction != 1.0f) {
        float* acc = output(qi);
        for (int64_t d = 0; d < s.head_dim_v; ++d) acc[d] *= correction;
      }
      running_sum[qi] = running_sum[qi] * correction + ops.exp_sum(sq, seen, new_max);
      running_max[qi] = new_max;
      ops.accumulate(v_rows + first, seen, sq, output(qi), s.head_dim_v);
    }
  }
  for (int64_t qi = 0; qi < n_queries; ++qi) {
    const float inv = running_sum[qi] > 0 ? 1.0f / running_sum[qi] : 0.0f;
    float* o = output(qi);
    for (int64_t d = 0; d < s.head_dim_v; ++d) o[d] *= inv;
  }
}

}  // namespace autoglm
