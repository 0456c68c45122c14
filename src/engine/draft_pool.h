// The KV pool a drafter keeps of its own (make_drafter.h: a draft model's, mtp_drafter.h: a
// NextN block's).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace autoglm {

// A draft model's own KV pool.
struct DraftPool {
  int64_t n_blocks = 0;
  int64_t block_size = 16;
  DType kv_type = DType::F16;
};

}  // namespace autoglm
