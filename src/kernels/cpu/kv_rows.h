// Operations on KV cache rows stored as f32, f16 or q8_0 (blocks of 32 with an fp16 scale), for
// the active ISA: a chunk of rows is decoded to floats once, then every query that attends to
// the chunk computes its scores and weighted values on the floats.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace autoglm::cpu {

// Positions handled together: a chunk's keys and values are decoded once, then serve every query.
constexpr int64_t kKvChunk = 32;

// The query (or output) vectors of a tile: row i at base + (i / group) * token_stride +
// (i % group) * head_stride (the query heads of a GQA group, for each token of the tile).
template <class T>
struct TileRows {
  T* base;
  int64_t token_stride, group, head_stride;
  T* row(int64_t i) const { return base + (i / group) * token_stride + (i % group) * head_stride; }
};

struct KvRowOps {
  // The chunk's kKvChunk key rows (null: a position not attended, read as zeros), transposed:
  // out[d * kKvChunk + j] = element d of row j.
  void (*decode_keys)(const uint8_t* const* rows, int64_t dim, float* out);
  // The chunk's value rows (null: zeros) as floats: out[j * dim + d].
  void (*decode_values)(const uint8_t* const* rows, int64_t dim, float* out);
  // s[i * kKvChunk + j] = scale * sum_d q.row(i)[d] * key_j[d] for nq queries and every key of the
  // chunk: one FMA chain along d per (query, key), so a query's scores do not depend on nq.
  void (*scores)(const float* keys_t, int64_t dim, const TileRows<const float>& q, int64_t nq, float scale, float* s);
  // out.row(i)[d] += sum_{j0 <= j < j1} p[i * kKvChunk + j] * value_j[d] for nq outputs: one FMA
  // chain along j per (output, dim); a zero weight leaves the sum as it was.
  void (*accumulate)(const float* values, int64_t dim, const float* p, const TileRows<float>& out, int64_t nq,
                     int64_t j0, int64_t j1);
};

// For DType F32, F16 or Q8_0; n a multiple of 32 for Q8_0.
KvRowOps kv_row_ops(DType t);

// Encodes n floats as one KV row slice of type t.
void encode_kv_row(DType t, const float* x, uint8_t* dst, int64_t n);

}  // namespace autoglm::cpu
