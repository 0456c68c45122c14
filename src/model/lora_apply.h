// The LoRA deltas of one ragged batch: its tokens grouped by adapter, so each adapter's
// matrices are read once per matmul, and y += scale * B (A x) for each group's tokens. A token
// with several adapters gets them in the order of its own set, whatever else is in the batch.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "model/lora.h"

namespace autoglm {

struct LoraGroup {
  const LoraAdapter* adapter = nullptr;
  std::vector<int32_t> tokens;  // ascending batch indices
};

// Groups for the tokens' sequences (`seq` per token, `sets` per sequence; a null or empty
// set is the base alone): first every set's first adapter, then the second ones, ...
std::vector<LoraGroup> group_by_adapter(const std::vector<int32_t>& seq, const std::vector<const LoraSet*>& sets);

// y[t] += adapter.scale * B (A x[t]) for the groups' tokens, where they change `target` of
// `layer`. x rows are n_in floats, y rows n_out. `scratch` grows as needed.
void apply_loras(ThreadPool& pool, const std::vector<LoraGroup>& groups, int64_t layer, LoraTarget target,
                 const float* x, float* y, std::vector<float>& scratch);

}  // namespace autoglm
