// Row kernels with AVX-512 VNNI dot products (on 256-bit registers); compiled with those flags.
#define AUTOGLM_ISA_NS avx512vnni
#include "kernels/cpu/vec_impl.inc"
