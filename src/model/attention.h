// Attention of one token's query heads over its sequence's cached keys and values, fused
// into one pass over the KV rows with an online softmax: positions in chunks of 16, each
// chunk's scores rescaling the running sums, so memory stays O(chunk) whatever the
// context. The query heads of a GQA group share every K and V row they load.
#pragma once

#include <cstdint>

#include "kernels/cpu/kv_rows.h"
#include "model/kv_cache.h"

namespace autoglm {

struct AttentionShape {
  int64_t group;  // query heads per KV head
  int64_t head_dim, head_dim_v;
  float scale;  // applied to q.k
};

// Floats of per-thread scratch attend_group needs.
int64_t attention_scratch_floats(const AttentionShape& shape);

// out[h * head_dim_v ...] for the `group` query heads q[h * head_dim ...] of KV head `kv_head`,
// over positions [0, n_pos) of `cache` in `layer`.
void attend_group(KvCache& cache, int64_t layer, int64_t kv_head, const float* q, int64_t n_pos,
                  const AttentionShape& shape, const cpu::KvRowOps& ops, float* scratch, float* out);

}  // namespace autoglm
