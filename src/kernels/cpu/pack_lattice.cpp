// The lattice types' file blocks (lattice_fields.h reads them) into lattice_format.h's layout.
#include <cstring>

#include "kernels/cpu/lattice_format.h"
#include "kernels/cpu/packed.h"
#include "kernels/ref/lattice_fields.h"

namespace autoglm::cpu {

void pack_lattice(DType t, const uint8_t* const* src, uint8_t* out) {
  const LatticeFormat lf = lattice_format(t);
  const int per_group = lf.indexes_per_group();
  for (int r = 0; r < kPackRows; ++r) {
    if (!src[r]) continue;
    const LatticeFields f = lattice_fields(t, src[r]);
    std::memcpy(out + 2 * r, &f.d, 2);
    for (int run = 0; run < lf.scale_runs; ++run) out[lf.scales_offset() + 8 * run + r] = f.codes[run];
    for (int g = 0; g < 32; ++g) {
      for (int k = 0; k < per_group; ++k)
        std::memcpy(out + lf.indexes_offset() + (int64_t(8 * g + r) * per_group + k) * lf.index_bytes, &f.indexes[g][k],
                    size_t(lf.index_bytes));  // little-endian: the low byte first
      if (!lf.signed_entries) out[lf.signs_offset() + 8 * g + r] = f.signs[g];
    }
  }
}

}  // namespace autoglm::cpu
