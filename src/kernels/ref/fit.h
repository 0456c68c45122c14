// Weighted least-squares fits of one run of values onto a format's codes: the scale (and offset)
// that the encoders then round to the format's scale bits. The weights are the importance of each
// value (an imatrix's mean squared activation of its column, or 1): the error measured is
// sum_i w_i (x_i - decoded_i)^2.
#pragma once

namespace autoglm::ref {

// x ~ scale * q - offset with q in [0, levels] and offset >= 0 (Q4_K, Q5_K, Q2_K).
void fit_affine(const float* x, const float* w, int n, int levels, float* scale, float* offset);

// x ~ scale * q with q in [-half, half - 1]; the sign of the scale makes the value of largest
// magnitude land on -half, the side with one more code (Q6_K, Q3_K).
float fit_symmetric(const float* x, const float* w, int n, int half);

// x ~ scale * values[q], q in [0, 16): a non-uniform codebook sorted ascending (IQ4_NL, IQ4_XS).
// The scale may be negative: the book need not be symmetric.
float fit_codebook(const float* x, const float* w, int n, const signed char* values);

// The index of the codebook entry nearest v (values sorted ascending).
int nearest_code(const signed char* values, float v);

// The signed value of largest magnitude among x[0..n).
float signed_absmax(const float* x, int n);

}  // namespace autoglm::ref
