#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/packed.h"
#include "kernels/ref/q8_activations.h"
#include "kernels/ref/quants.h"

namespace autoglm::cpu {

#define AUTOGLM_DECLARE_ISA(ns)                                                                                    \
  namespace ns {                                                                                                   \
  void decode_row(DType type, const uint8_t* src, float* dst, int64_t n);                                          \
  void matmul_rows(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1,      \
                   float* scratch);                                                                                \
  int tile_rows();                                                                                                 \
  void matmul_rows_int(const WeightMatrix& w, const void* xq, int64_t n_tokens, float* y, int64_t r0, int64_t r1); \
  bool has_packed_kernels();                                                                                       \
  void matmul_packed(const WeightMatrix& w, const void* xq, int64_t n_tokens, float* y, int64_t g0, int64_t g1);   \
  KvRowOps kv_row_ops(DType t);                                                                                    \
  }
AUTOGLM_DECLARE_ISA(generic)
#ifdef AUTOGLM_HAVE_AVX2_KERNELS
AUTOGLM_DECLARE_ISA(avx2)
#endif
#ifdef AUTOGLM_HAVE_VNNI_KERNELS
AUTOGLM_DECLARE_ISA(avx512vnni)
AUTOGLM_DECLARE_ISA(avxvnni)
#endif
#undef AUTOGLM_DECLARE_ISA

namespace {

struct KernelSet {
  const char* name;
  decltype(&generic::decode_row) decode_row;
  decltype(&generic::matmul_rows) matmul_rows;
  int tile_rows;
  decltype(&generic::matmul_rows_int) matmul_rows_int;
  bool has_packed;
  decltype(&generic::matmul_packed) matmul_packed;
  decltype(&generic::kv_row_ops) row_ops;
};

#define AUTOGLM_KERNEL_SET(ns)                                                                            \
  KernelSet {                                                                                             \
#ns, ns::decode_row, ns::matmul_rows, ns::tile_rows(), ns::matmul_rows_int, ns::has_packed_kernels(), \
        ns::matmul_packed, ns::kv_row_ops                                                                 \
  }

std::vector<KernelSet> runnable_sets() {
  std::vector<KernelSet> sets;
  const auto& f = cpu_features();
  (void)f;
#ifdef AUTOGLM_HAVE_VNNI_KERNELS
  if (f.avx2 && f.fma && f.f16c && f.avx512vl && f.avx512bw && f.avx512vnni)
    sets.push_back(AUTOGLM_KERNEL_SET(avx512vnni));
  if (f.avx2 && f.fma && f.f16c && f.avxvnni) sets.push_back(AUTOGLM_KERNEL_SET(avxvnni));
#endif
#ifdef AUTOGLM_HAVE_AVX2_KERNELS
  if (f.avx2 && f.fma && f.f16c) sets.push_back(AUTOGLM_KERNEL_SET(avx2));
#endif
  sets.push_back(AUTOGLM_KERNEL_SET(generic));
  return sets;  // best first
}

const KernelSet*& active_set() {
  static const KernelSet* active = nullptr;
  return active;
}

const KernelSet& kernels() {
  if (!active_set()) {
    const char* forced = std::getenv("AUTOGLM_CPU_ISA");
    if (!forced || !select_kernel_isa(forced)) select_kernel_isa(runnable_sets().front().name);
  }
  return *active_set();
}

}  // namespace

bool select_kernel_isa(const char* name) {
  static const std::vector<KernelSet> sets = runnable_sets();
  for (const auto& s : sets)
    if (std::string(s.name) == name) {
      active_set() = &s;
      return true;
    }
  return false;
}

const char* kernel_isa() {
  return kernels().name;
}

KvRowOps kv_row_ops(DType t) {
  return kernels().row_ops(t);
}

void encode_kv_row(DType t, const float* x, uint8_t* dst, int64_t n) {
  ref::quantize_row(t, x, dst, n);
}

void dequantize_row(const WeightMatrix& w, int64_t row, float* out) {
  kernels().decode_row(w.type, w.data + row * w.row_bytes, out, w.cols);
}

int activation_block(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0: return 32;
    case DType::Q4_K:
    case DType::Q6_K: return 256;
    default: return 0;
  }
}

bool uses_int8_activations(DType t) {
  return activation_block(t) != 0;
}

namespace {

// Quantizes n_tokens rows of activations into `buffer` in the layout the type's integer kernels read.
const void* quantize_activations(DType t, const float* x, int64_t n_tokens, int64_t cols,
                                 std::vector<uint8_t>& buffer) {
  const bool k_blocks = activation_block(t) == 256;
  const size_t bytes = k_blocks ? size_t(cols / 256) * sizeof(Q8KBlock) : size_t(cols / 32) * sizeof(Q8Block);
  if (buffer.size() < bytes * size_t(n_tokens)) buffer.resize(bytes * size_t(n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) {
    uint8_t* dst = buffer.data() + size_t(t) * bytes;
    if (k_blocks)
      ref::quantize_activations_q8k(x + t * cols, cols, reinterpret_cast<Q8KBlock*>(dst));
    else
      ref::quantize_activations_q8(x + t * cols, cols, reinterpret_cast<Q8Block*>(dst));
  }
  return buffer.data();
}

}  // namespace

void activations_as_seen(DType t, const float* x, int64_t n_tokens, int64_t cols, float* out) {
  std::vector<uint8_t> buffer;
  if (!uses_int8_activations(t)) {
    std::copy(x, x + n_tokens * cols, out);
    return;
  }
  const uint8_t* q = static_cast<const uint8_t*>(quantize_activations(t, x, n_tokens, cols, buffer));
  if (activation_block(t) == 256)
    ref::dequantize_activations_q8k(reinterpret_cast<const Q8KBlock*>(q), n_tokens * cols, out);
  else
    ref::dequantize_activations_q8(reinterpret_cast<const Q8Block*>(q), n_tokens * cols, out);
}

void matmul(ThreadPool& pool, const WeightMatrix& w, const float* x, int64_t n_tokens, float* y) {
  const KernelSet& k = kernels();
  if (w.packed && k.has_packed && packed_as_floats(w.type)) {
    pool.parallel_for(packed_work_units(w),
                      [&](int, int64_t u0, int64_t u1) { k.matmul_packed(w, x, n_tokens, y, u0, u1); });
    return;
  }
  if (uses_int8_activations(w.type)) {
    // Whatever the batch, the same arithmetic: activations quantized once, integer dots per row.
    thread_local std::vector<uint8_t> buffer;
    const void* xq = quantize_activations(w.type, x, n_tokens, w.cols, buffer);
    if (w.packed && k.has_packed) {
      pool.parallel_for(packed_groups(w),
                        [&](int, int64_t g0, int64_t g1) { k.matmul_packed(w, xq, n_tokens, y, g0, g1); });
      return;
    }
    pool.parallel_for(w.rows, [&](int, int64_t r0, int64_t r1) { k.matmul_rows_int(w, xq, n_tokens, y, r0, r1); });
    return;
  }
  const int64_t tiles = (w.rows + k.tile_rows - 1) / k.tile_rows;
  pool.parallel_for(tiles, [&](int, int64_t t0, int64_t t1) {
    thread_local std::vector<float> scratch;
    const size_t need = size_t(k.tile_rows * w.cols);
    if (scratch.size() < need) scratch.resize(need);
    const int64_t r0 = t0 * k.tile_rows, r1 = std::min(w.rows, t1 * k.tile_rows);
    k.matmul_rows(w, x, n_tokens, y, r0, r1, scratch.data());
  });
}

}  // namespace autoglm::cpu
