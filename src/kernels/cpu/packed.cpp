#include "kernels/cpu/packed.h"

#include <cstdlib>
#include <cstring>

namespace autoglm::cpu {
namespace {

constexpr int64_t kScaleBytes = 2 * kPackRows;

int64_t quant_bytes(DType t) {
  return t == DType::Q4_0 ? 16 : 32;
}

}  // namespace

bool packable(DType t) {
  return t == DType::Q4_0 || t == DType::Q8_0;
}

int64_t packed_block_bytes(DType t) {
  return kScaleBytes + kPackRows * quant_bytes(t);
}

int64_t packed_groups(const WeightMatrix& w) {
  return (w.rows + kPackRows - 1) / kPackRows;
}

int64_t packed_bytes(const WeightMatrix& w) {
  return packed_groups(w) * (w.cols / 32) * packed_block_bytes(w.type);
}

void pack_groups(const WeightMatrix& w, uint8_t* dst, int64_t g0, int64_t g1) {
  const int64_t n_blocks = w.cols / 32, src_block = dtype_info(w.type).block_bytes;
  const int64_t qbytes = quant_bytes(w.type), out_block = packed_block_bytes(w.type);
  for (int64_t g = g0; g < g1; ++g) {
    uint8_t* out = dst + g * n_blocks * out_block;
    std::memset(out, 0, size_t(n_blocks * out_block));
    for (int r = 0; r < kPackRows && g * kPackRows + r < w.rows; ++r) {
      const uint8_t* row = w.data + (g * kPackRows + r) * w.row_bytes;
      for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* src = row + b * src_block;
        uint8_t* blk = out + b * out_block;
        std::memcpy(blk + 2 * r, src, 2);
        for (int64_t c = 0; c < qbytes / 4; ++c) std::memcpy(blk + kScaleBytes + 32 * c + 4 * r, src + 2 + 4 * c, 4);
      }
    }
  }
}

void AlignedFree::operator()(uint8_t* p) const {
  std::free(p);
}

PackedBuffer pack_matrix(ThreadPool& pool, WeightMatrix& w) {
  const size_t bytes = size_t((packed_bytes(w) + 63) / 64 * 64);
  PackedBuffer buf(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
  if (!buf) return buf;
  uint8_t* dst = buf.get();
  pool.parallel_for(packed_groups(w), [&](int, int64_t g0, int64_t g1) { pack_groups(w, dst, g0, g1); });
  w.packed = dst;
  return buf;
}

}  // namespace autoglm::cpu
