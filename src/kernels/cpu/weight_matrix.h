// A weight matrix as the CPU kernels read it: matmul.h multiplies by it, packed.h interleaves it.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace autoglm::cpu {

// A row-major weight matrix [rows, cols] as stored in the file (one encoded row per output).
struct WeightMatrix {
  DType type = DType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_bytes = 0;
  const uint8_t* packed = nullptr;  // the same weights interleaved for the integer kernels (packed.h), if made

  int64_t bytes() const { return rows * row_bytes; }  // as the file stores them
};

}  // namespace autoglm::cpu
