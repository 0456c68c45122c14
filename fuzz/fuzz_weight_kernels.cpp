// Weight matrices of any quantized type holding arbitrary bytes (corrupt scales, NaN or huge half
// floats, codes past their grids) through the fast kernels: every set this CPU runs, packed and
// row by row, one token and a batch, lattice entries gathered and loaded one by one. Nothing may
// read out of bounds, and an output must be finite wherever the reference decode bounds it well
// inside the float range (finite weights whose products cannot overflow).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed.h"
#include "kernels/ref/quants.h"

namespace {

using namespace autoglm;

// Activations in [-1, 1] from a fixed sequence: the weights are what is fuzzed.
std::vector<float> activations(size_t n) {
  std::vector<float> x(n);
  uint32_t s = 12345;
  for (float& v : x) {
    s = s * 1664525u + 1013904223u;
    v = float(int32_t(s >> 8) % 2001 - 1000) / 1000.0f;
  }
  return x;
}

// Which outputs must be finite: those whose products cannot overflow a float on any order of
// summation (the sum of |w| |x| over the row, from the reference decode, well inside the float
// range). A corrupt but finite scale can make finite weights near FLT_MAX whose sum overflows;
// those outputs may be infinite, never a crash.
std::vector<bool> outputs_bound_finite(DType t, const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols,
                                       int64_t row_bytes, const std::vector<float>& x, int64_t n_tokens) {
  std::vector<bool> bound(size_t(rows * n_tokens), false);
  std::vector<float> w(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    ref::dequantize_row(t, bytes.data() + r * row_bytes, w.data(), cols);
    for (int64_t tk = 0; tk < n_tokens; ++tk) {
      double magnitude = 0;
      for (int64_t c = 0; c < cols; ++c)
        magnitude += std::fabs(double(w[size_t(c)])) * std::fabs(x[size_t(tk * cols + c)]);
      // 1e36: the int8 activations' partial sums stay within ~1.4x of it (127 / max |x|), far
      // below FLT_MAX, in any order of summation.
      bound[size_t(tk * rows + r)] = std::isfinite(magnitude) && magnitude < 1e36;
    }
  }
  return bound;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;  // a type, a shape and at least one weight byte
  const auto info = dtype_info(uint32_t(data[0]) % 48);
  if (!info || info->block_elems == 1 || !ref::dtype_is_supported(info->type)) return 0;
  const DType type = info->type;
  const int64_t rows = 1 + data[1] % 19, cols = info->block_elems * (1 + data[2] % 3);
  constexpr int64_t kTokenCounts[] = {1, 2, 5};
  const int64_t n_tokens = kTokenCounts[data[3] % 3];
  const int64_t row_bytes = dtype_row_bytes(type, cols);
  std::vector<uint8_t> bytes(size_t(rows * row_bytes));  // exact size: ASan sees overreads
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = data[4 + i % (size - 4)];
  const std::vector<float> x = activations(size_t(n_tokens * cols));
  const std::vector<bool> must_be_finite = outputs_bound_finite(type, bytes, rows, cols, row_bytes, x, n_tokens);

  static ThreadPool pool(2);
  cpu::WeightMatrix m{type, bytes.data(), rows, cols, row_bytes};
  cpu::PackedBuffer packed;
  if (cpu::packable(type)) packed = cpu::pack_matrix(pool, m);
  std::vector<float> y(size_t(rows * n_tokens));
  // The packed kernels where the type has them, then the row-by-row ones (what AUTOGLM_REPACK=0
  // runs), on every set.
  std::vector<const uint8_t*> layouts = {nullptr};
  if (m.packed) layouts.insert(layouts.begin(), m.packed);
  for (const uint8_t* layout : layouts) {
    m.packed = layout;
    for (const char* isa : {"generic", "avx2", "avxvnni", "avx512vnni"}) {
      if (!cpu::select_kernel_isa(isa)) continue;
      for (const auto gathers : {cpu::LatticeGathers::kOn, cpu::LatticeGathers::kOff}) {
        cpu::set_lattice_gathers(gathers);
        // Gathers off: IQ2_XXS and IQ3_XXS by byte permutes where the CPU has them, else by scalar loads.
        cpu::set_lattice_permutes(gathers == cpu::LatticeGathers::kOn ? cpu::LatticePermutes::kOff
                                                                      : cpu::LatticePermutes::kAuto);
        std::fill(y.begin(), y.end(), std::nanf(""));  // an output a kernel leaves unwritten shows
        cpu::matmul(pool, m, x.data(), n_tokens, y.data());
        for (size_t i = 0; i < y.size(); ++i)
          if (must_be_finite[i] && !std::isfinite(y[i])) {  // finite weights and activations gave NaN/Inf
            std::fprintf(stderr, "%s, %lld x %lld, %lld tokens, kernels %s%s (lattice gathers %s): output %zu is %g\n",
                         std::string(dtype_name(type)).c_str(), (long long)rows, (long long)cols, (long long)n_tokens,
                         isa, layout ? ", packed" : ", rows", gathers == cpu::LatticeGathers::kOn ? "on" : "off", i,
                         double(y[i]));
            std::abort();
          }
      }
    }
  }
  return 0;
}
