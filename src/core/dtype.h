// Weight/tensor element types, numbered as in GGUF files (the ggml type ids).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "autoglm/settings.h"

namespace autoglm {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,  // ternary, five per byte in base 3
  TQ2_0 = 35,  // ternary, two bits each
  MXFP4 = 39,  // E8M0 scale, 32 e2m1 codes
};

struct DTypeInfo {
  DType type;
  std::string_view name;
  int64_t block_elems;  // elements per block (1 for plain types)
  int64_t block_bytes;  // bytes per block
};

// Layout of a known type id, or nullopt for ids this build does not know.
std::optional<DTypeInfo> dtype_info(uint32_t id);
const DTypeInfo& dtype_info(DType t);
std::string_view dtype_name(DType t);
// Case-insensitive lookup by name ("q4_0", "F16"...).
std::optional<DType> dtype_from_name(std::string_view name);

// A KV cache type's element type (autoglm/settings.h: KvType, kv_type_from_name).
DType kv_dtype(KvType type);

// llama.cpp's general.file_type number for a model whose matrices are mostly `t` (0 for others).
uint32_t gguf_file_type(DType t);

// Bytes taken by one row of n elements; -1 when n is not a whole number of blocks.
int64_t dtype_row_bytes(DType t, int64_t n);

}  // namespace autoglm
