// Row operations on KV cache rows stored as f32, f16 or q8_0 (blocks of 32 with an fp16
// scale): what decode attention does per cached position, for the active ISA.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace autoglm::cpu {

struct KvRowOps {
  // out[j] = scale * sum_d row_j[d] * q[d], for n rows
  void (*scores)(const uint8_t* const* rows, int64_t n, const float* q, int64_t dim, float scale, float* out);
  // acc[d] += sum_j p[j] * row_j[d]
  void (*accumulate)(const uint8_t* const* rows, int64_t n, const float* p, float* acc, int64_t dim);
  // s[j] = exp(s[j] - max) in place; returns the sum
  float (*exp_sum)(float* s, int64_t n, float max);
};

// For DType F32, F16 or Q8_0; n a multiple of 32 for Q8_0.
KvRowOps kv_row_ops(DType t);

// Encodes n floats as one KV row slice of type t.
void encode_kv_row(DType t, const float* x, uint8_t* dst, int64_t n);

}  // namespace autoglm::cpu
