#include "kernels/cpu/packed.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#include "kernels/cpu/int_format.h"
#include "kernels/cpu/lattice_format.h"
#include "kernels/ref/block_decode.h"
#include "kernels/ref/ternary_codes.h"

namespace autoglm::cpu {
namespace {

constexpr int64_t kScaleBytes = 2 * kPackRows;
constexpr int64_t kQ4KHeader = 160;  // d, dmin, scales, mins of 8 rows

constexpr int64_t kQ6KHeader = 144;  // d and scales of 8 rows

constexpr int64_t kQ3KCodes = 512, kQ3KHighBits = 256;  // after Q6_K's header: d, scales

constexpr int64_t kIq4XsHeader = 80;  // d of 8 rows, then the runs' signed scales [run][row]

int64_t quant_bytes(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::MXFP4:
    case DType::IQ4_NL: return 16;
    case DType::Q8_0: return 32;
    case DType::Q5_K: return 160;  // nibbles, then high bits
    case DType::Q6_K: return 192;
    default: return 128;  // Q4_K, IQ4_XS
  }
}

// 4-byte pieces of each row's codes side by side: chunk c holds bytes 4c..4c+3 of rows 0..7.
void interleave_codes(const uint8_t* const* codes, int64_t n_bytes, uint8_t* out) {
  for (int r = 0; r < kPackRows; ++r)
    if (codes[r])
      for (int64_t c = 0; c < n_bytes / 4; ++c) std::memcpy(out + 32 * c + 4 * r, codes[r] + 4 * c, 4);
}

// Element k of one row to position k * 8 + r of a k-major float group.
template <typename Element>
void transpose_into(const uint8_t* row, int64_t cols, int r, uint8_t* out) {
  for (int64_t k = 0; k < cols; ++k) {
    Element v;
    std::memcpy(&v, row + k * int64_t(sizeof(Element)), sizeof(Element));
    std::memcpy(out + (k * kPackRows + r) * int64_t(sizeof(Element)), &v, sizeof(Element));
  }
}

// IQ4_XS: d per row, each run's 6-bit scale less 32 as an int8, and each run's 16 code bytes
// interleaved as IQ4_NL's.
void pack_iq4_xs(const uint8_t* const* src, uint8_t* out) {
  for (int run = 0; run < 8; ++run) {
    const uint8_t* codes[kPackRows] = {};
    for (int r = 0; r < kPackRows; ++r) {
      if (!src[r]) continue;
      std::memcpy(out + 2 * r, src[r], 2);
      uint16_t high;
      std::memcpy(&high, src[r] + 2, 2);
      const int ls = ((src[r][4 + run / 2] >> (4 * (run % 2))) & 0x0f) | (((high >> (2 * run)) & 3) << 4);
      out[16 + 8 * run + r] = uint8_t(int8_t(ls - 32));
      codes[r] = src[r] + 8 + 16 * run;
    }
    interleave_codes(codes, 16, out + kIq4XsHeader + 128 * run);
  }
}

// Q3_K: d and the 16 signed scales as Q6_K packs them; the 2-bit codes of each half (32 bytes a
// row) interleaved 4 bytes a row; then per half, shift and 4-byte chunk a 32-bit word whose bit
// 4r + i is row r's high bit of element 128 h + 32 s + 4 c + i (Q5_0's layout of fifth bits).
void pack_q3_k(const uint8_t* const* src, uint8_t* out) {
  const uint8_t* codes[2][kPackRows] = {};
  for (int r = 0; r < kPackRows; ++r) {
    if (!src[r]) continue;
    std::memcpy(out + 2 * r, src[r] + 108, 2);
    for (int s = 0; s < 16; ++s) out[16 + 16 * (s / 2) + 2 * r + (s % 2)] = uint8_t(int8_t(q3_k_scale(src[r] + 96, s)));
    codes[0][r] = src[r] + 32;
    codes[1][r] = src[r] + 64;
    for (int h = 0; h < 2; ++h)
      for (int s = 0; s < 4; ++s)
        for (int c = 0; c < 8; ++c) {
          uint8_t* at = out + kQ6KHeader + kQ3KCodes + 4 * (32 * h + 8 * s + c);
          uint32_t word;
          std::memcpy(&word, at, 4);
          for (int i = 0; i < 4; ++i) word |= uint32_t((src[r][4 * c + i] >> (4 * h + s)) & 1) << (4 * r + i);
          std::memcpy(at, &word, 4);
        }
  }
  interleave_codes(codes[0], 32, out + kQ6KHeader);
  interleave_codes(codes[1], 32, out + kQ6KHeader + 256);
}

// Q2_K: d and dmin of 8 rows, each sub-block's scale-and-min byte in Q6_K's layout of scales, then
// the 2-bit codes as Q3_K's.
constexpr int64_t kQ2KHeader = 160;

void pack_q2_k(const uint8_t* const* src, uint8_t* out) {
  const uint8_t* codes[2][kPackRows] = {};
  for (int r = 0; r < kPackRows; ++r) {
    if (!src[r]) continue;
    std::memcpy(out + 2 * r, src[r] + 80, 2);
    std::memcpy(out + 16 + 2 * r, src[r] + 82, 2);
    for (int s = 0; s < 16; ++s) out[32 + 16 * (s / 2) + 2 * r + (s % 2)] = src[r][s];
    codes[0][r] = src[r] + 16;
    codes[1][r] = src[r] + 48;
  }
  interleave_codes(codes[0], 32, out + kQ2KHeader);
  interleave_codes(codes[1], 32, out + kQ2KHeader + 256);
}

// TQ1_0 and TQ2_0: d of 8 rows, then the 2-bit codes (0, 1, 2 for -1, 0, 1) as Q2_K's; TQ1_0's
// base-3 digits unpacked to them (2.06 bits a weight: the file's 1.69 would cost a multiply and a
// shift per digit in the kernel).
constexpr int64_t kTernaryHeader = 16;

void pack_ternary(DType t, const uint8_t* const* src, uint8_t* out) {
  uint8_t two_bit[kPackRows][64];
  const uint8_t* codes[2][kPackRows] = {};
  for (int r = 0; r < kPackRows; ++r) {
    if (!src[r]) continue;
    const uint8_t* bytes = src[r];
    if (t == DType::TQ1_0) {
      uint8_t c[256];
      ref::tq1_0_codes(src[r], c);
      ref::tq2_0_pack(c, two_bit[r]);
      bytes = two_bit[r];
    }
    std::memcpy(out + 2 * r, src[r] + (t == DType::TQ1_0 ? ref::kTq1ScaleOffset : ref::kTq2ScaleOffset), 2);
    codes[0][r] = bytes;
    codes[1][r] = bytes + 32;
  }
  interleave_codes(codes[0], 32, out + kTernaryHeader);
  interleave_codes(codes[1], 32, out + kTernaryHeader + 256);
}

// One block of 8 rows (null: a row past the end, left zero).
void pack_block(DType t, const uint8_t* const* src, uint8_t* out) {
  if (t == DType::Q2_K) return pack_q2_k(src, out);
  if (t == DType::TQ1_0 || t == DType::TQ2_0) return pack_ternary(t, src, out);
  if (is_lattice(t)) return pack_lattice(t, src, out);
  if (t == DType::IQ4_XS) return pack_iq4_xs(src, out);
  if (t == DType::Q3_K) return pack_q3_k(src, out);
  const uint8_t* codes[kPackRows] = {};
  if (t == DType::Q6_K) {  // ql (128) then qh (64) are contiguous in the block: chunks of both in one run
    for (int r = 0; r < kPackRows; ++r) {
      if (!src[r]) continue;
      std::memcpy(out + 2 * r, src[r] + 208, 2);  // d
      const int8_t* sc = reinterpret_cast<const int8_t*>(src[r] + 192);
      for (int s = 0; s < 16; ++s) out[16 + 16 * (s / 2) + 2 * r + (s % 2)] = uint8_t(sc[s]);
      codes[r] = src[r];
    }
    interleave_codes(codes, 192, out + kQ6KHeader);
    return;
  }
  if (t == DType::Q4_K || t == DType::Q5_K) {
    const uint8_t* high_bits[kPackRows] = {};
    for (int r = 0; r < kPackRows; ++r) {
      if (!src[r]) continue;
      std::memcpy(out + 2 * r, src[r], 2);           // d
      std::memcpy(out + 16 + 2 * r, src[r] + 2, 2);  // dmin
      for (int s = 0; s < 8; ++s) {
        int sc, m;
        k_scale_min(s, src[r] + 4, sc, m);
        out[32 + 8 * s + r] = uint8_t(sc);
        out[96 + 16 * (s / 2) + 2 * r + (s % 2)] = uint8_t(m);
      }
      codes[r] = src[r] + (t == DType::Q5_K ? 48 : 16);
      high_bits[r] = src[r] + 16;
    }
    interleave_codes(codes, 128, out + kQ4KHeader);
    if (t == DType::Q5_K) interleave_codes(high_bits, 32, out + kQ4KHeader + 1024);
    return;
  }
  const IntFormat f = int_format(t);
  for (int r = 0; r < kPackRows; ++r) {
    if (!src[r]) continue;
    if (t == DType::MXFP4) {  // the scale decoded once here, as a float
      const float d = e8m0_half_to_float(src[r][0]);
      std::memcpy(out + 4 * r, &d, 4);
      codes[r] = src[r] + f.qs_offset;
      continue;
    }
    std::memcpy(out + 2 * r, src[r], 2);
    if (f.has_min) std::memcpy(out + kScaleBytes + 2 * r, src[r] + 2, 2);
    if (f.qh_offset >= 0) {  // chunk c: bit 4r+i of word 0 (1) = fifth bit of element 4c+i (16+4c+i)
      uint32_t qh;
      std::memcpy(&qh, src[r] + f.qh_offset, 4);
      uint8_t* bits = out + packed_int_header_bytes(t) - 32;
      for (int c = 0; c < 4; ++c)
        for (int half = 0; half < 2; ++half) {
          uint32_t word;
          std::memcpy(&word, bits + 8 * c + 4 * half, 4);
          for (int i = 0; i < 4; ++i) word |= ((qh >> (16 * half + 4 * c + i)) & 1u) << (4 * r + i);
          std::memcpy(bits + 8 * c + 4 * half, &word, 4);
        }
    }
    codes[r] = src[r] + f.qs_offset;
  }
  interleave_codes(codes, quant_bytes(t), out + packed_int_header_bytes(t));
}

}  // namespace

bool packable(DType t) {
  return is_int_format(t) || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K || t == DType::IQ4_XS ||
         t == DType::Q3_K || t == DType::Q2_K || t == DType::TQ1_0 || t == DType::TQ2_0 || is_lattice(t) ||
         packed_as_floats(t);
}

bool packed_as_floats(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

int64_t packed_block_bytes(DType t) {
  if (packed_as_floats(t)) return kPackRows * dtype_info(t).block_bytes;
  if (t == DType::IQ4_XS) return kIq4XsHeader + 8 * 128;
  if (t == DType::Q3_K) return kQ6KHeader + kQ3KCodes + kQ3KHighBits;
  if (t == DType::Q2_K) return kQ2KHeader + kQ3KCodes;
  if (t == DType::TQ1_0 || t == DType::TQ2_0) return kTernaryHeader + kQ3KCodes;
  if (is_lattice(t)) return lattice_format(t).block_bytes();
  const int64_t header = t == DType::Q4_K || t == DType::Q5_K ? kQ4KHeader
                         : t == DType::Q6_K                   ? kQ6KHeader
                                                              : packed_int_header_bytes(t);
  return header + kPackRows * quant_bytes(t);
}

int64_t packed_work_units(const WeightMatrix& w) {
  return packed_as_floats(w.type) ? (packed_groups(w) + 1) / 2 : packed_groups(w);
}

int64_t packed_groups(const WeightMatrix& w) {
  return (w.rows + kPackRows - 1) / kPackRows;
}

int64_t packed_bytes(const WeightMatrix& w) {
  return packed_groups(w) * (w.cols / dtype_info(w.type).block_elems) * packed_block_bytes(w.type);
}

void pack_groups(const WeightMatrix& w, uint8_t* dst, int64_t g0, int64_t g1) {
  const auto& info = dtype_info(w.type);
  const int64_t n_blocks = w.cols / info.block_elems, out_block = packed_block_bytes(w.type);
  for (int64_t g = g0; g < g1; ++g) {
    uint8_t* out = dst + g * n_blocks * out_block;
    std::memset(out, 0, size_t(n_blocks * out_block));
    if (packed_as_floats(w.type)) {
      for (int r = 0; r < kPackRows && g * kPackRows + r < w.rows; ++r) {
        const uint8_t* row = w.data + (g * kPackRows + r) * w.row_bytes;
        if (info.block_bytes == 4)
          transpose_into<uint32_t>(row, w.cols, r, out);
        else
          transpose_into<uint16_t>(row, w.cols, r, out);
      }
      continue;
    }
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* src[kPackRows] = {};
      for (int r = 0; r < kPackRows && g * kPackRows + r < w.rows; ++r)
        src[r] = w.data + (g * kPackRows + r) * w.row_bytes + b * info.block_bytes;
      pack_block(w.type, src, out + b * out_block);
    }
  }
}

void AlignedFree::operator()(uint8_t* p) const {
  std::free(p);
}

int64_t packed_room(const WeightMatrix& w) {
  return (packed_bytes(w) + 63) / 64 * 64;
}

namespace {

PackedBuffer allocate_64_aligned(size_t bytes) {
  return PackedBuffer(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
}

}  // namespace

PackedBuffer allocate_packed(size_t bytes) {
  constexpr size_t kHugePage = size_t(2) << 20;
  if (bytes < kHugePage) return allocate_64_aligned(bytes);
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  PackedBuffer buf(static_cast<uint8_t*>(std::aligned_alloc(kHugePage, rounded)));
#if defined(MADV_HUGEPAGE)
  if (buf) madvise(buf.get(), rounded, MADV_HUGEPAGE);  // advice: without huge pages, 4 KiB ones
#endif
  return buf;
}

void pack_matrix_into(ThreadPool& pool, WeightMatrix& w, uint8_t* dst) {
  pool.parallel_for(packed_groups(w), [&](int, int64_t g0, int64_t g1) { pack_groups(w, dst, g0, g1); });
  w.packed = dst;
}

PackedBuffer pack_matrices(ThreadPool& pool, const std::vector<WeightMatrix*>& matrices,
                           FunctionRef<void(size_t)> after_each) {
  int64_t room = 0;
  for (const WeightMatrix* m : matrices) room += packed_room(*m);
  PackedBuffer buf = allocate_packed(size_t(room));
  if (!buf) return buf;
  uint8_t* at = buf.get();
  for (size_t i = 0; i < matrices.size(); ++i) {
    pack_matrix_into(pool, *matrices[i], at);
    at += packed_room(*matrices[i]);
    after_each(i);
  }
  return buf;
}

PackedBuffer pack_matrix(ThreadPool& pool, WeightMatrix& w) {
  // A matrix of its own (an image's keys and values, a probe): 64-byte aligned, no whole huge pages.
  PackedBuffer buf = allocate_64_aligned(size_t(packed_room(w)));
  if (buf) pack_matrix_into(pool, w, buf.get());
  return buf;
}

void repack_matrix(ThreadPool& pool, WeightMatrix& w, PackedBuffer& buf, int64_t& capacity) {
  if (!buf || capacity < packed_bytes(w)) {
    buf = pack_matrix(pool, w);
    capacity = buf ? packed_bytes(w) : 0;
    return;
  }
  pack_matrix_into(pool, w, buf.get());
}

}  // namespace autoglm::cpu
