// Attention of query heads over their sequence's cached keys and values, fused into one
// pass over the KV rows with an online softmax (flash-attention style): positions in chunks of
// 32, each chunk's scores rescaling the running sums, so memory stays O(chunk) whatever the
// context. A chunk's K and V rows are loaded and decoded to floats once for every query that
// sees them: the query heads of a GQA group and the consecutive tokens of a prefill tile. Each
// query's arithmetic is the same as if it were alone.
#pragma once

#include <cstdint>

#include "kernels/cpu/kv_rows.h"
#include "model/kv_cache.h"

namespace autoglm {

struct AttentionShape {
  int64_t group;  // query heads per KV head
  int64_t head_dim, head_dim_v;
  float scale;                   // applied to q.k
  int64_t window = 0;            // sliding window: a query sees only its latest `window` positions; 0: all
  const float* sinks = nullptr;  // per query head (kv_head * group + h): a logit in the softmax with no value
};

// Most consecutive tokens of one sequence attended together.
constexpr int64_t kAttentionTileTokens = 8;

// Floats of per-thread scratch attend_tile needs.
int64_t attention_scratch_floats(const AttentionShape& shape);

// A tile of n_tokens <= kAttentionTileTokens consecutive tokens of one sequence: token i sees
// positions [0, first_n_pos + i) (the last `window` of them with a sliding window). Its query heads of KV head
// `kv_head` are at q + i * q_stride + h * head_dim; outputs go to out + i * out_stride + h * head_dim_v.
struct AttentionTile {
  const float* q;
  int64_t q_stride;
  float* out;
  int64_t out_stride;
  int64_t n_tokens;
  int64_t first_n_pos;
};

void attend_tile(KvCache& cache, int64_t layer, int64_t kv_head, const AttentionTile& tile, const AttentionShape& shape,
                 const cpu::KvRowOps& ops, float* scratch);

}  // namespace autoglm
