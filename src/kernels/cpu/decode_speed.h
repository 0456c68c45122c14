// Which weight type decodes fastest on this CPU: what `--draft-quantize auto` asks. A decode
// step streams every weight from memory once, so the time per weight of a one-token matmul
// over a matrix larger than the caches ranks the types as the draft model's steps would.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace autoglm::cpu {

struct DecodeSpeed {
  DType type = DType::F32;
  double ns_per_weight = 0;  // best of a few one-token matmuls
};

// Times each type's one-token matmul (packed as the model's would be) over a matrix of `cols`
// columns and enough rows to exceed the last-level cache several times over.
std::vector<DecodeSpeed> measure_decode_speed(ThreadPool& pool, std::span<const DType> types, int64_t cols);

// The fastest of `speeds`; one within `tie` (a fraction) of it that is listed earlier wins,
// so callers list the more accurate types first.
DType fastest_type(std::span<const DecodeSpeed> speeds, double tie = 0.05);

}  // namespace autoglm::cpu
