// Weight blocks of any type with arbitrary bytes (corrupt scales, NaN half floats, exponents
// out of range, grid indexes anywhere): the reference decoder never reads out of bounds, and a row
// the load-time check (block by block) passes decodes, whole, to finite values. The fast kernels on
// such blocks: fuzz_weight_kernels.
#include <cmath>
#include <cstdlib>
#include <vector>

#include "kernels/ref/quants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto info = autoglm::dtype_info(uint32_t(data[0]) % 48);
  if (!info || !autoglm::ref::dtype_is_supported(info->type)) return 0;
  const int64_t blocks = int64_t(size - 1) / info->block_bytes;
  if (blocks == 0) return 0;
  const int64_t n = blocks * info->block_elems;
  const std::vector<uint8_t> bytes(data + 1, data + 1 + blocks * info->block_bytes);  // exact size: ASan sees overreads
  std::vector<float> values(static_cast<size_t>(n));
  autoglm::ref::dequantize_row(info->type, bytes.data(), values.data(), n);
  if (autoglm::ref::first_nonfinite_block(info->type, bytes.data(), n) >= 0) return 0;
  for (float v : values)
    if (!std::isfinite(v)) std::abort();  // the check passed a block that decodes to NaN/Inf
  return 0;
}
