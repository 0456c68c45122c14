// Where the 32-element integer formats keep their parts, shared by the packer and the kernels.
#pragma once

#include "core/dtype.h"

namespace autoglm::cpu {

// fp16 scale d at byte 0, an fp16 min m at byte 2 for the affine formats (y = d*q + m),
// optional fifth bits, and codes centred by `centre` for the symmetric ones. MXFP4 has an E8M0
// exponent at byte 0 and nibbles that index an e2m1 table; IQ4_NL is Q4_0's layout with nibbles
// that index its codebook.
struct IntFormat {
  int bytes;
  bool has_min;
  int qh_offset;  // -1: no fifth bits
  int qs_offset;
  bool eight_bit;
  int centre;
};

constexpr IntFormat int_format(DType t) {
  switch (t) {
    case DType::Q4_0: return {18, false, -1, 2, false, 8};
    case DType::Q4_1: return {20, true, -1, 4, false, 0};
    case DType::Q5_0: return {22, false, 2, 6, false, 16};
    case DType::Q5_1: return {24, true, 4, 8, false, 0};
    case DType::MXFP4: return {17, false, -1, 1, false, 0};
    case DType::IQ4_NL: return {18, false, -1, 2, false, 0};
    default: return {34, false, -1, 2, true, 0};  // Q8_0
  }
}

constexpr bool is_int_format(DType t) {
  return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0 ||
         t == DType::MXFP4 || t == DType::IQ4_NL;
}

// Packed block of 8 rows (packed.h): d[8], m[8] if affine, 4 chunks x 2 words of fifth bits if any,
// then the code chunks. MXFP4's d[8] are floats: 2^(e - 128) is out of fp16's range.
constexpr int64_t packed_int_header_bytes(DType t) {
  if (t == DType::MXFP4) return 32;
  const IntFormat f = int_format(t);
  return 16 + (f.has_min ? 16 : 0) + (f.qh_offset >= 0 ? 32 : 0);
}
constexpr int64_t packed_int_block_bytes(DType t) {
  return packed_int_header_bytes(t) + (int_format(t).eight_bit ? 256 : 128);
}

}  // namespace autoglm::cpu
