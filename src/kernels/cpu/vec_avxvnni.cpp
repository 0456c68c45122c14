// Row kernels with AVX-VNNI dot products; compiled with those flags.
#define AUTOGLM_ISA_NS avxvnni
#include "kernels/cpu/vec_impl.inc"
