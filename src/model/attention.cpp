#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/element_ops.h"

namespace autoglm {
namespace {

// Chunks start at multiples of kChunk, so results do not depend on the cache's spans.
constexpr int64_t kChunk = cpu::kKvChunk;

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

// A sink's logit joins each query's softmax denominator (no value): the running sums take
// exp(sink) on the same scale as the scores, rescaling when the sink is the larger.
void add_sinks(const float* sinks, int64_t group, int64_t n_queries, float* running_max, float* running_sum,
               const cpu::TileRows<float>& outputs, int64_t width) {
  for (int64_t qi = 0; qi < n_queries; ++qi) {
    const float sink = sinks[qi % group];
    const float new_max = std::max(running_max[qi], sink);
    const float correction = std::exp(running_max[qi] - new_max);
    if (correction != 1.0f)
      for (float* o = outputs.row(qi); o < outputs.row(qi) + width; ++o) *o *= correction;
    running_sum[qi] = running_sum[qi] * correction + std::exp(sink - new_max);
    running_max[qi] = new_max;
  }
}

}  // namespace

int64_t attention_scratch_floats(const AttentionShape& s) {
  // scores and running max/sum per query, then the chunk's keys and values as floats
  return kAttentionTileTokens * s.group * (kChunk + 2) + kChunk * (s.head_dim + s.head_dim_v);
}

void attend_tile(KvCache& cache, int64_t layer, int64_t kv_head, const AttentionTile& tile, const AttentionShape& s,
                 const cpu::KvRowOps& ops, float* scratch) {
  const int64_t n_queries = tile.n_tokens * s.group;  // query qi = token i * group + head h
  float* scores = scratch;                            // [n_queries][kChunk]: scores, then weights
  float* running_max = scores + n_queries * kChunk;   // [n_queries]
  float* running_sum = running_max + n_queries;       // [n_queries]
  float* keys_t = running_sum + n_queries;            // [head_dim][kChunk]
  float* values = keys_t + kChunk * s.head_dim;       // [kChunk][head_dim_v]
  const cpu::TileRows<const float> queries{tile.q, tile.q_stride, s.group, s.head_dim};
  const cpu::TileRows<float> outputs{tile.out, tile.out_stride, s.group, s.head_dim_v};
  for (int64_t qi = 0; qi < n_queries; ++qi) std::fill(outputs.row(qi), outputs.row(qi) + s.head_dim_v, 0.0f);
  auto limit = [&](int64_t qi) { return tile.first_n_pos + qi / s.group; };  // positions this query sees
  auto lower = [&](int64_t qi) { return s.window > 0 ? std::max<int64_t>(0, limit(qi) - s.window) : 0; };
  const int64_t k_offset = kv_head * cache.format().k_head_bytes;
  const int64_t v_offset = kv_head * cache.format().v_head_bytes;
  std::fill(running_max, running_max + n_queries, -std::numeric_limits<float>::infinity());
  std::fill(running_sum, running_sum + n_queries, 0.0f);
  RowWalker key_rows(cache, layer, true), value_rows(cache, layer, false);
  const cpu::ElementOps& element = cpu::element_ops();

  const uint8_t* k_rows[kChunk];
  const uint8_t* v_rows[kChunk];
  const int64_t n_pos = limit(n_queries - 1);
  for (int64_t c0 = lower(0) - lower(0) % kChunk; c0 < n_pos; c0 += kChunk) {
    const int64_t n = std::min(kChunk, n_pos - c0);
    const int64_t skip = std::max<int64_t>(0, lower(0) - c0);  // before every window: never read
    for (int64_t j = 0; j < kChunk; ++j) {
      const bool read = j >= skip && j < n;
      k_rows[j] = read ? key_rows.row(c0 + j) + k_offset : nullptr;
      v_rows[j] = read ? value_rows.row(c0 + j) + v_offset : nullptr;
    }
    // Decoded once for all the tile's queries.
    ops.decode_keys(k_rows, s.head_dim, keys_t);
    ops.decode_values(v_rows, s.head_dim_v, values);
    ops.scores(keys_t, s.head_dim, queries, n_queries, s.scale, scores);
    for (int64_t qi = 0; qi < n_queries; ++qi) {
      float* sq = scores + qi * kChunk;
      const int64_t first = std::max<int64_t>(0, lower(qi) - c0);  // window start inside the chunk
      const int64_t end = std::min(n, limit(qi) - c0);
      if (end <= first) {  // outside this query's positions: weights 0 leave its sums alone
        std::fill(sq, sq + kChunk, 0.0f);
        continue;
      }
      const float new_max = std::max(running_max[qi], element.max(sq + first, end - first));
      // 0 on the first chunk; exactly 1 (exp(0)) while the maximum stands, without the call.
      const float correction = new_max == running_max[qi] ? 1.0f : std::exp(running_max[qi] - new_max);
      if (correction != 1.0f)
        for (float* o = outputs.row(qi); o < outputs.row(qi) + s.head_dim_v; ++o) *o *= correction;
      running_sum[qi] = running_sum[qi] * correction + element.exp_sum(sq + first, end - first, new_max);
      running_max[qi] = new_max;
      std::fill(sq, sq + first, 0.0f);
      std::fill(sq + end, sq + kChunk, 0.0f);
    }
    ops.accumulate(values, s.head_dim_v, scores, outputs, n_queries, skip, n);
  }
  if (s.sinks)
    add_sinks(s.sinks + kv_head * s.group, s.group, n_queries, running_max, running_sum, outputs, s.head_dim_v);
  for (int64_t qi = 0; qi < n_queries; ++qi) {
    const float inv = running_sum[qi] > 0 ? 1.0f / running_sum[qi] : 0.0f;
    for (float* o = outputs.row(qi); o < outputs.row(qi) + s.head_dim_v; ++o) *o *= inv;
  }
}

}  // namespace autoglm
