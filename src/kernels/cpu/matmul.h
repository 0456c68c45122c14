// Matrix multiplication by a weight matrix in any supported weight type.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/cpu/weight_matrix.h"

namespace autoglm::cpu {

// y[t, r] = sum_k W[r, k] * x[t, k] for t < n_tokens; x is [n_tokens, cols], y is [n_tokens, rows].
// Weights stay encoded. Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4 and the k-quants (Q4_K, Q5_K, Q6_K) meet
// activations quantized to int8 blocks (integer dot products, as the reference engine does);
// float types are decoded a few rows at a time into a per-thread buffer and meet float activations. Matrices with a
// packed copy (packed.h) use the interleaved kernels where the CPU has them.
void matmul(ThreadPool& pool, const WeightMatrix& w, const float* x, int64_t n_tokens, float* y);

// Several matrices with the same input: activations quantized once per format, and one job
// for the threads over all of them (n <= 4; the matrices must have the same cols).
void matmul_multi(ThreadPool& pool, const WeightMatrix* const* ws, float* const* ys, int n, const float* x,
                  int64_t n_tokens);

// One product of a batch: y = x W^T for n_tokens rows of x.
struct MatmulJob {
  const WeightMatrix* w;
  const float* x;
  int64_t n_tokens;
  float* y;
};

// Products with inputs of their own (a mixture-of-experts layer: each chosen expert over
// its own tokens) in one job for the threads over all their work units; jobs that share an
// input quantize it once. Each product's rows are computed as matmul computes them.
void matmul_batch(ThreadPool& pool, const MatmulJob* jobs, int n);

// What a weight type's kernels multiply: float activations; floats rounded to BF16 (BF16
// weights with bf16_activations() on: every kernel of the type then sees the same values); or
// activations quantized on the fly to int8 blocks of 32 (Q8_0 layout) or of 256 (Q8_K layout:
// the k-quants).
enum class ActivationFormat {
  kFloat,
  kBf16Floats,
  kQ8Blocks32,
  kQ8KBlocks256
};  // matmul keeps one buffer per format: keep kQ8KBlocks256 last
ActivationFormat activation_format(DType weight_type);
// Int8 blocks of either size.
bool uses_int8_activations(DType t);
// BF16 weights: activations rounded to BF16 (as llama.cpp does, and as a transformers model loaded in
// bfloat16 computes), which lets CPUs with AVX512-BF16 multiply pairs of them with vdpbf16ps (twice the
// products of an FMA per instruction), or kept as floats. kAuto (the default) rounds them where the
// kernel set in use has those instructions (AVX-512 with AVX512-BF16) and keeps floats elsewhere, where
// rounding would cost time and buy nothing. The CLI sets it from --bf16-activations and
// AUTOGLM_BF16_ACTIVATIONS. Not to be changed while kernels run.
enum class Bf16Activations { kAuto, kOn, kOff };
void set_bf16_activations(Bf16Activations mode);
// Whether BF16 weights' activations are rounded now (the mode resolved for the kernel set in use).
bool bf16_activations();
// Whether the kernel set in use multiplies BF16 pairs in hardware (what kAuto follows).
bool kernel_isa_has_bf16_dot();
// The activations as the kernels of type t see them (quantized and decoded again, or copied).
void activations_as_seen(DType t, const float* x, int64_t n_tokens, int64_t cols, float* out);

// How the lattice types' decode kernels fetch their grid entries: by gathers, or by scalar loads
// (the same bits either way). kAuto: gathers where the CPU's are fast (CpuFeatures::fast_gathers).
// The CLI reads AUTOGLM_LATTICE_GATHERS. Not to be changed while kernels run.
enum class LatticeGathers { kAuto, kOn, kOff };
void set_lattice_gathers(LatticeGathers mode);
bool lattice_gathers();

// IQ2_XXS's and IQ3_XXS's decode kernels on the AVX-512 set: grid entries by byte permutes of the
// grids' codes held in registers, no loads of entries (kAuto, the default: where the CPU has
// AVX512-VBMI and GFNI), or as LatticeGathers says (kOff). The same bits either way. The CLI reads
// AUTOGLM_LATTICE_PERMUTES. Not to be changed while kernels run.
enum class LatticePermutes { kAuto, kOff };
void set_lattice_permutes(LatticePermutes mode);
// Whether they run where the AVX-512 set does (the mode, and the CPU's instructions).
bool lattice_permutes();

// Decodes one row to floats (embedding lookups).
void dequantize_row(const WeightMatrix& w, int64_t row, float* out);

// Name of the kernel set in use: "avx512vnni", "avxvnni", "avx2" or "generic". The best one the
// CPU runs is chosen on first use; select_kernel_isa switches (the CLI does so for
// AUTOGLM_CPU_ISA=NAME in the environment).
const char* kernel_isa();
// Switches kernel sets (tests compare them); false if `name` is unknown or not runnable here.
// Not to be called while kernels run.
bool select_kernel_isa(const char* name);

}  // namespace autoglm::cpu
