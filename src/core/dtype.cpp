#include "core/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include "core/check.h"

namespace autoglm {
namespace {

constexpr std::array<DTypeInfo, 32> kTypes = {{
    {DType::F32, "F32", 1, 4},
    {DType::F16, "F16", 1, 2},
    {DType::Q4_0, "Q4_0", 32, 18},
    {DType::Q4_1, "Q4_1", 32, 20},
    {DType::Q5_0, "Q5_0", 32, 22},
    {DType::Q5_1, "Q5_1", 32, 24},
    {DType::Q8_0, "Q8_0", 32, 34},
    {DType::Q8_1, "Q8_1", 32, 36},
    {DType::Q2_K, "Q2_K", 256, 84},
    {DType::Q3_K, "Q3_K", 256, 110},
    {DType::Q4_K, "Q4_K", 256, 144},
    {DType::Q5_K, "Q5_K", 256, 176},
    {DType::Q6_K, "Q6_K", 256, 210},
    {DType::Q8_K, "Q8_K", 256, 292},
    {DType::IQ4_NL, "IQ4_NL", 32, 18},
    {DType::I8, "I8", 1, 1},
    {DType::I16, "I16", 1, 2},
    {DType::I32, "I32", 1, 4},
    {DType::I64, "I64", 1, 8},
    {DType::F64, "F64", 1, 8},
    {DType::BF16, "BF16", 1, 2},
    {DType::MXFP4, "MXFP4", 32, 17},
    {DType::IQ4_XS, "IQ4_XS", 256, 136},
    {DType::TQ1_0, "TQ1_0", 256, 54},
    {DType::TQ2_0, "TQ2_0", 256, 66},
    {DType::IQ2_XXS, "IQ2_XXS", 256, 66},
    {DType::IQ2_XS, "IQ2_XS", 256, 74},
    {DType::IQ2_S, "IQ2_S", 256, 82},
    {DType::IQ3_XXS, "IQ3_XXS", 256, 98},
    {DType::IQ3_S, "IQ3_S", 256, 110},
    {DType::IQ1_S, "IQ1_S", 256, 50},
    {DType::IQ1_M, "IQ1_M", 256, 56},
}};

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (uint32_t(t.type) == id) return t;
  return std::nullopt;
}

const DTypeInfo& dtype_info(DType t) {
  for (const auto& info : kTypes)
    if (info.type == t) return info;
  AUTOGLM_CHECK(false && "unknown DType");
  return kTypes[0];
}

std::string_view dtype_name(DType t) {
  return dtype_info(t).name;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& t : kTypes) {
    if (t.name.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i)
      same = std::toupper(static_cast<unsigned char>(name[i])) == t.name[i];
    if (same) return t.type;
  }
  return std::nullopt;
}

Result<KvType> kv_type_from_name(std::string_view name) {
  if (const auto t = dtype_from_name(name)) {
    if (*t == DType::F16) return KvType::kF16;
    if (*t == DType::Q8_0) return KvType::kQ8_0;
    if (*t == DType::F32) return KvType::kF32;
  }
  return invalid_argument("KV cache type '" + std::string(name) + "' is not one of f32, f16, q8_0");
}

const char* kv_type_name(KvType type) {
  switch (type) {
    case KvType::kF16: return "f16";
    case KvType::kQ8_0: return "q8_0";
    case KvType::kF32: return "f32";
  }
  return "?";
}

DType kv_dtype(KvType type) {
  switch (type) {
    case KvType::kQ8_0: return DType::Q8_0;
    case KvType::kF32: return DType::F32;
    case KvType::kF16: break;
  }
  return DType::F16;
}

int64_t dtype_row_bytes(DType t, int64_t n) {
  const auto& info = dtype_info(t);
  if (n % info.block_elems != 0) return -1;
  return n / info.block_elems * info.block_bytes;
}

uint32_t gguf_file_type(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q4_1: return 3;
    case DType::Q8_0: return 7;
    case DType::Q5_0: return 8;
    case DType::Q5_1: return 9;
    case DType::Q4_K: return 14;
    case DType::Q5_K: return 16;
    case DType::Q6_K: return 18;
    case DType::BF16: return 32;
    case DType::MXFP4: return 38;  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
    default: return 0;
  }
}

}  // namespace autoglm
