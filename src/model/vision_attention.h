// A vision tower's attention: bidirectional softmax attention of every head within segments of
// the token sequence (an image, or one of Qwen2.5-VL's windows); no mask beyond them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"

namespace autoglm {

// q, k, v and out are [N, n_head * head_dim]; segment i is tokens [bounds[i], bounds[i + 1]).
// Only the queries [first, last) are computed (the caller may split a long image into parts).
void vision_attention(ThreadPool& pool, const float* q, const float* k, const float* v, int64_t n_head,
                      int64_t head_dim, const std::vector<int64_t>& bounds, float* out, int64_t first, int64_t last);

}  // namespace autoglm
