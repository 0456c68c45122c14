// Row kernels for any x86-64 (or other) CPU.
#define AUTOGLM_ISA_NS generic
#include "kernels/cpu/vec_impl.inc"
