// Row operations on KV cache rows stored as f32, f16 or q8_0 (blocks of 32 with an fp16
// scale): what decode attention does per cached position, for the active ISA.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace autoglm::cpu {

struct KvRowOps {
  float (*dot)(const uint8_t* row, const float* q, int64_t n);       // sum_i row[i] * q[i]
  void (*axpy)(const uint8_t* row, float p, float* acc, int64_t n);  // acc[i] += p * row[i]
};

// For DType F32, F16 or Q8_0; n a multiple of 32 for Q8_0.
KvRowOps kv_row_ops(DType t);

// Encodes n floats as one KV row slice of type t.
void encode_kv_row(DType t, const float* x, uint8_t* dst, int64_t n);

}  // namespace autoglm::cpu
