// Row kernels for AVX2 + FMA + F16C; this file is compiled with those flags.
#define AUTOGLM_ISA_NS avx2
#include "kernels/cpu/vec_impl.inc"
