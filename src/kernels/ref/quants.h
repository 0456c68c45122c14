// Reference (scalar) conversion of rows between float and every weight type.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace autoglm::ref {

// Types the engine can read and compute with (dequantize, multiply): weights of these types load.
bool dtype_is_supported(DType t);
// Types the engine can also write (quantize_row has an encoder): create-model, quantize, export-lora.
bool dtype_can_quantize(DType t);

// dst[0..n) = the n values encoded at src. n must be a whole number of blocks.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// Encodes n floats into dst (dtype_row_bytes(t, n) bytes). importance (n values, or nullptr for
// equal weights) weighs each value's squared error in the scale fits: an importance matrix's
// mean squared activation per input column. The legacy 32-value types round their absmax scale.
void quantize_row(DType t, const float* src, void* dst, int64_t n, const float* importance = nullptr);

// The first block of the n values at src (of any type) that decodes to a NaN or an infinity (a
// corrupt scale: a NaN half float, an exponent out of range), or -1 when all are finite.
int64_t first_nonfinite_block(DType t, const void* src, int64_t n);

// sum_i row[i] * x[i] in double precision: the oracle for the fast kernels.
double dot(DType t, const void* row, const float* x, int64_t n);

}  // namespace autoglm::ref
