#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/cpu_features.h"
#include "core/half.h"
#include "kernels/cpu/element_ops.h"
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
  const ElementOps& element_ops();                                                                                 \
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
  decltype(&generic::element_ops) element_ops;
  bool bf16_dot = false;  // vdpbf16ps runs: the AVX-512 set on a CPU with AVX512-BF16
};

#define AUTOGLM_KERNEL_SET(ns)                                                                            \
  KernelSet {                                                                                             \
#ns, ns::decode_row, ns::matmul_rows, ns::tile_rows(), ns::matmul_rows_int, ns::has_packed_kernels(), \
        ns::matmul_packed, ns::kv_row_ops, ns::element_ops, false                                         \
  }

std::vector<KernelSet> runnable_sets() {
  std::vector<KernelSet> sets;
  const auto& f = cpu_features();
  (void)f;
#ifdef AUTOGLM_HAVE_VNNI_KERNELS
  if (f.avx2 && f.fma && f.f16c && f.avx512vl && f.avx512bw && f.avx512vnni) {
    sets.push_back(AUTOGLM_KERNEL_SET(avx512vnni));
    sets.back().bf16_dot = f.avx512bf16;
  }
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
  if (!active_set()) select_kernel_isa(runnable_sets().front().name);
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

const ElementOps& element_ops() {
  return kernels().element_ops();
}

void encode_kv_row(DType t, const float* x, uint8_t* dst, int64_t n) {
  ref::quantize_row(t, x, dst, n);
}

void dequantize_row(const WeightMatrix& w, int64_t row, float* out) {
  kernels().decode_row(w.type, w.data + row * w.row_bytes, out, w.cols);
}

ActivationFormat activation_format(DType weight_type) {
  switch (weight_type) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::MXFP4:
    case DType::IQ4_NL: return ActivationFormat::kQ8Blocks32;
    case DType::IQ4_XS:  // as ggml pairs it: its 6-bit run scales apply in integers (packed_dot_iq4xs)
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q3_K:
    case DType::Q2_K:
    case DType::TQ1_0:
    case DType::TQ2_0:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ1_S:
    case DType::IQ1_M: return ActivationFormat::kQ8KBlocks256;
    case DType::BF16: return bf16_activations() ? ActivationFormat::kBf16Floats : ActivationFormat::kFloat;
    default: return ActivationFormat::kFloat;
  }
}

namespace {
std::atomic<Bf16Activations> bf16_activations_mode{Bf16Activations::kAuto};
}  // namespace

void set_bf16_activations(Bf16Activations mode) {
  bf16_activations_mode = mode;
}

bool kernel_isa_has_bf16_dot() {
  return kernels().bf16_dot;
}

bool bf16_activations() {
  const Bf16Activations mode = bf16_activations_mode.load(std::memory_order_relaxed);
  return mode == Bf16Activations::kOn || (mode == Bf16Activations::kAuto && kernel_isa_has_bf16_dot());
}

namespace {
std::atomic<LatticeGathers> lattice_gathers_mode{LatticeGathers::kAuto};
}  // namespace

void set_lattice_gathers(LatticeGathers mode) {
  lattice_gathers_mode = mode;
}

bool lattice_gathers() {
  const LatticeGathers mode = lattice_gathers_mode.load(std::memory_order_relaxed);
  return mode == LatticeGathers::kOn || (mode == LatticeGathers::kAuto && cpu_features().fast_gathers);
}

namespace {
std::atomic<LatticePermutes> lattice_permutes_mode{LatticePermutes::kAuto};
}  // namespace

void set_lattice_permutes(LatticePermutes mode) {
  lattice_permutes_mode = mode;
}

bool lattice_permutes() {
  const CpuFeatures& f = cpu_features();
  return lattice_permutes_mode.load(std::memory_order_relaxed) == LatticePermutes::kAuto && f.avx512vbmi && f.gfni;
}

bool uses_int8_activations(DType t) {
  const ActivationFormat f = activation_format(t);
  return f == ActivationFormat::kQ8Blocks32 || f == ActivationFormat::kQ8KBlocks256;
}

namespace {

size_t activation_row_bytes(ActivationFormat f, int64_t cols) {
  switch (f) {
    case ActivationFormat::kQ8KBlocks256: return size_t(cols / 256) * sizeof(Q8KBlock);
    case ActivationFormat::kQ8Blocks32: return size_t(cols / 32) * sizeof(Q8Block);
    default: return size_t(cols) * sizeof(float);
  }
}

// The activations of tokens [t0, t1) in format f (not kFloat, which is x itself).
void quantize_activation_rows(ActivationFormat f, const float* x, int64_t t0, int64_t t1, int64_t cols, uint8_t* out) {
  const size_t bytes = activation_row_bytes(f, cols);
  for (int64_t tok = t0; tok < t1; ++tok) {
    uint8_t* dst = out + size_t(tok) * bytes;
    if (f == ActivationFormat::kBf16Floats)
      for (int64_t i = 0; i < cols; ++i)
        reinterpret_cast<float*>(dst)[i] = bf16_to_float(float_to_bf16(x[tok * cols + i]));
    else if (f == ActivationFormat::kQ8KBlocks256)
      element_ops().quantize_q8k(x + tok * cols, cols, reinterpret_cast<Q8KBlock*>(dst));
    else
      element_ops().quantize_q8(x + tok * cols, cols, reinterpret_cast<Q8Block*>(dst));
  }
}

// How one matrix is computed, and how many work units the threads share.
enum class Path { kPackedFloat, kPackedInt, kRowsInt, kRowsFloat };

Path path_of(const WeightMatrix& w, const KernelSet& k) {
  if (w.packed && k.has_packed) return packed_as_floats(w.type) ? Path::kPackedFloat : Path::kPackedInt;
  return uses_int8_activations(w.type) ? Path::kRowsInt : Path::kRowsFloat;
}

int64_t work_units(const WeightMatrix& w, Path p, const KernelSet& k) {
  switch (p) {
    case Path::kPackedFloat:
    case Path::kPackedInt: return packed_work_units(w);
    case Path::kRowsInt: return w.rows;
    default: return (w.rows + k.tile_rows - 1) / k.tile_rows;
  }
}

void run_units(const KernelSet& k, const WeightMatrix& w, Path p, const void* xin, int64_t n_tokens, float* y,
               int64_t u0, int64_t u1) {
  switch (p) {
    case Path::kPackedFloat:
    case Path::kPackedInt: return k.matmul_packed(w, xin, n_tokens, y, u0, u1);
    case Path::kRowsInt: return k.matmul_rows_int(w, xin, n_tokens, y, u0, u1);
    default: {
      thread_local std::vector<float> scratch;
      const size_t need = size_t(k.tile_rows * w.cols);
      if (scratch.size() < need) scratch.resize(need);
      const int64_t r0 = u0 * k.tile_rows, r1 = std::min(w.rows, u1 * k.tile_rows);
      return k.matmul_rows(w, static_cast<const float*>(xin), n_tokens, y, r0, r1, scratch.data());
    }
  }
}

}  // namespace

void activations_as_seen(DType t, const float* x, int64_t n_tokens, int64_t cols, float* out) {
  const ActivationFormat f = activation_format(t);
  if (f == ActivationFormat::kFloat) {
    std::copy(x, x + n_tokens * cols, out);
    return;
  }
  if (f == ActivationFormat::kBf16Floats) {
    quantize_activation_rows(f, x, 0, n_tokens, cols, reinterpret_cast<uint8_t*>(out));
    return;
  }
  std::vector<uint8_t> q(activation_row_bytes(f, cols) * size_t(n_tokens));
  quantize_activation_rows(f, x, 0, n_tokens, cols, q.data());
  if (f == ActivationFormat::kQ8KBlocks256)
    ref::dequantize_activations_q8k(reinterpret_cast<const Q8KBlock*>(q.data()), n_tokens * cols, out);
  else
    ref::dequantize_activations_q8(reinterpret_cast<const Q8Block*>(q.data()), n_tokens * cols, out);
}

void matmul(ThreadPool& pool, const WeightMatrix& w, const float* x, int64_t n_tokens, float* y) {
  const WeightMatrix* ws[] = {&w};
  float* ys[] = {y};
  matmul_multi(pool, ws, ys, 1, x, n_tokens);
}

void matmul_multi(ThreadPool& pool, const WeightMatrix* const* ws, float* const* ys, int n, const float* x,
                  int64_t n_tokens) {
  constexpr int kMax = 4;
  AUTOGLM_CHECK(n >= 1 && n <= kMax);
  MatmulJob jobs[kMax];
  for (int i = 0; i < n; ++i) {
    AUTOGLM_CHECK(ws[i]->cols == ws[0]->cols);
    jobs[i] = {ws[i], x, n_tokens, ys[i]};
  }
  matmul_batch(pool, jobs, n);
}

namespace {

// An input in one weight format: made once however many products read it.
struct PreparedInput {
  const float* x;
  ActivationFormat format;
  int64_t n_tokens, cols;
  uint8_t* data;      // the converted rows (null: float activations, x itself)
  int64_t first_row;  // among all the inputs' rows, for splitting their conversion
};

// The distinct (input, format) pairs of the jobs; job i reads prepared[input_of[i]]. Jobs that
// start at the same input may read different numbers of its rows (a MoE decode: an expert reads its
// one token's row of x, the shared expert all of x): the input is made for the most of them.
void find_inputs(const MatmulJob* jobs, int n, std::vector<PreparedInput>& prepared, std::vector<int>& input_of) {
  prepared.clear();
  input_of.resize(size_t(n));
  for (int i = 0; i < n; ++i) {
    const ActivationFormat f = activation_format(jobs[i].w->type);
    auto same = [&](const PreparedInput& p) { return p.x == jobs[i].x && p.format == f; };
    auto it = std::find_if(prepared.begin(), prepared.end(), same);
    if (it == prepared.end()) {
      prepared.push_back({jobs[i].x, f, jobs[i].n_tokens, jobs[i].w->cols, nullptr, 0});
      it = prepared.end() - 1;
    }
    it->n_tokens = std::max(it->n_tokens, jobs[i].n_tokens);
    input_of[size_t(i)] = int(it - prepared.begin());
  }
  int64_t first = 0;  // the inputs' rows numbered one after another, for splitting their conversion
  for (PreparedInput& p : prepared) {
    p.first_row = first;
    first += p.n_tokens;
  }
}

// Converts every input that is not float, the rows of all of them split over the threads.
void convert_inputs(ThreadPool& pool, std::vector<PreparedInput>& prepared,
                    std::vector<std::vector<uint8_t>>& buffers) {
  if (buffers.size() < prepared.size()) buffers.resize(prepared.size());
  for (size_t i = 0; i < prepared.size(); ++i) {
    PreparedInput& p = prepared[i];
    if (p.format == ActivationFormat::kFloat) continue;
    const size_t bytes = activation_row_bytes(p.format, p.cols) * size_t(p.n_tokens);
    if (buffers[i].size() < bytes) buffers[i].resize(bytes);
    p.data = buffers[i].data();
  }
  const int64_t total = prepared.back().first_row + prepared.back().n_tokens;
  const PreparedInput* begin = prepared.data();
  const PreparedInput* end = begin + prepared.size();
  const auto convert = [&](int64_t r0, int64_t r1) {
    for (const PreparedInput* it = begin; it != end; ++it) {
      const PreparedInput& p = *it;
      const int64_t b = std::max(r0, p.first_row) - p.first_row,
                    e = std::min(r1, p.first_row + p.n_tokens) - p.first_row;
      if (p.data && b < e) quantize_activation_rows(p.format, p.x, b, e, p.cols, p.data);
    }
  };
  if (total >= 2 * pool.size())
    pool.parallel_for(total, [&](int, int64_t r0, int64_t r1) { convert(r0, r1); });
  else
    convert(0, total);
}

// Shares of a job's work units: a few per thread, claimed as threads come free, so that a
// thread slowed by its CPU (a busy vCPU) hands the rest to the others; but no more shares than
// kMinUnits units each allow (one a thread at least), since each share starts a new stream from memory.
// A job of many weight bytes gets shares of about kShareBytes instead, so that the wait for the
// others' last share stays short: a MoE decode's output projection (167 MiB, 8 shares) waited
// 1.6-3.9% of its time for it, in 2 MiB shares 0.3-0.4% (Intel Xeon, 2 threads); a 512 MiB
// one-token matvec streamed about 3% faster (Q4_K 29.4 -> 30.4 GB/s, four rounds in turn).
int share_count(int64_t units, int64_t weight_bytes, int threads) {
  constexpr int64_t kPerThread = 4, kMinUnits = 16, kShareBytes = int64_t(2) << 20;
  const int64_t most = std::max<int64_t>(kPerThread * threads, weight_bytes / kShareBytes);
  const int64_t shares = std::clamp<int64_t>(units / kMinUnits, threads, most);
  // A whole number a thread: 7 shares for 2 threads leave one running alone at the end (a lone 1 MiB
  // one-token matvec, Intel Xeon: Q8_0 3 -> 2 shares 23-26 -> 29-31 GB/s, Q4_K 7 -> 6 21-24 -> 24-25).
  return int(shares - shares % threads);
}

}  // namespace

void matmul_batch(ThreadPool& pool, const MatmulJob* jobs, int n) {
  const KernelSet& k = kernels();
  // Per calling thread, kept between steps so that a pass allocates nothing once warm.
  thread_local std::vector<std::vector<uint8_t>> buffers;
  thread_local std::vector<PreparedInput> prepared;
  thread_local std::vector<int> input_of;
  thread_local std::vector<Path> paths;
  thread_local std::vector<int64_t> first_unit;
  if (n == 0) return;
  find_inputs(jobs, n, prepared, input_of);
  convert_inputs(pool, prepared, buffers);
  paths.resize(size_t(n));
  first_unit.assign(size_t(n + 1), 0);
  int64_t weight_bytes = 0;
  for (int i = 0; i < n; ++i) {
    weight_bytes += jobs[i].w->bytes();
    paths[size_t(i)] = path_of(*jobs[i].w, k);
    first_unit[size_t(i + 1)] = first_unit[size_t(i)] + work_units(*jobs[i].w, paths[size_t(i)], k);
  }
  // One job for the threads over the work units of all the products. The pool's threads see
  // their own thread_locals: they get this thread's through plain pointers.
  const int64_t* starts = first_unit.data();
  const Path* job_paths = paths.data();
  const PreparedInput* inputs = prepared.data();
  const int* job_input = input_of.data();
  pool.parallel_for_shares(
      starts[n], share_count(starts[n], weight_bytes, pool.size()), [&](int, int64_t u0, int64_t u1) {
        // The first product that holds unit u0, then on while units remain.
        int i = int(std::upper_bound(starts, starts + n + 1, u0) - starts) - 1;
        for (; i < n && starts[i] < u1; ++i) {
          const int64_t b = std::max(u0, starts[i]), e = std::min(u1, starts[i + 1]);
          const PreparedInput& in = inputs[job_input[i]];
          const void* xin = in.data ? static_cast<const void*>(in.data) : static_cast<const void*>(in.x);
          if (b < e)
            run_units(k, *jobs[i].w, job_paths[i], xin, jobs[i].n_tokens, jobs[i].y, b - starts[i], e - starts[i]);
        }
      });
}

}  // namespace autoglm::cpu
