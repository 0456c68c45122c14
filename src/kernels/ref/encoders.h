// Block encoders: one block of floats, with each value's importance weight, into a type's bytes.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace autoglm::ref {

// x and w hold one block of the type (w: the weight of each value's squared error).
using BlockEncoder = void (*)(const float* x, const float* w, uint8_t* block);

// The 2- and 3-bit K types, the IQ4 codebook types and the ternary types; nullptr for others.
BlockEncoder low_bit_encoder(DType t);

// The IQ1/IQ2/IQ3 lattice types; nullptr for others.
BlockEncoder lattice_encoder(DType t);

// Rounds v to fp16 and stores it at p.
void write_half(uint8_t* p, float v);

}  // namespace autoglm::ref
