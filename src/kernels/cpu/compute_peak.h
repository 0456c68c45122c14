// Compute probes beside the bandwidth probe: how many float multiply-adds, and int8
// multiply-adds, per second the pool's threads can issue, so that benchmarks can say what share
// of the machine's peak a compute-bound test (prefill) reaches.
#pragma once

#include "core/thread_pool.h"

namespace autoglm::cpu {

// Best of `repeats` runs of independent fused multiply-add chains on every thread, at the float
// width of the kernel set in use (kernel_isa(): 512 bits for AVX-512, 256 for AVX2 and AVX-VNNI,
// scalar for the generic set), in floating-point operations per second (a multiply-add counts as two). Integer
// dot-product kernels (the quantized types) can exceed it.
double measure_fma_peak(ThreadPool& pool, int repeats = 3);

// The same for the int8 products the quantized types' kernels issue with the kernel set in use
// (kernel_isa()): u8 x s8 summed by fours into int32 with VNNI, u8 x s8 pairs into int16 with
// AVX2, plain integers otherwise; at the kernels' vector width (512 bits with AVX-512 VNNI, else
// 256), in operations per second (a multiply-add counts as two).
double measure_int8_peak(ThreadPool& pool, int repeats = 3);

}  // namespace autoglm::cpu
