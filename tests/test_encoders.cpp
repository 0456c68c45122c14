// The block encoders of the lattice types (IQ2_XXS ... IQ1_M): values a block of the type can hold
// come back exactly (which pins every field's layout, the signs' parity bit included, to the
// decoder's), and on Gaussian values each type's error sits where its bits put it. Their quality
// against llama.cpp's quantizer is test_perplexity's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "kernels/ref/quants.h"

namespace autoglm {
namespace {

constexpr DType kLatticeTypes[] = {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS,
                                   DType::IQ3_S,   DType::IQ1_S,  DType::IQ1_M};

// Where each type keeps its fp16 block scale (IQ1_M: a nibble in each scale word's top).
void set_block_scale(DType t, uint8_t* block, float d) {
  const uint16_t bits = float_to_fp16(d);
  if (t != DType::IQ1_M) {
    std::memcpy(block, &bits, 2);
    return;
  }
  for (int k = 0; k < 4; ++k) {
    uint16_t word;
    std::memcpy(&word, block + 48 + 2 * k, 2);
    word = uint16_t((word & 0x0fff) | (((bits >> (4 * k)) & 0xf) << 12));
    std::memcpy(block + 48 + 2 * k, &word, 2);
  }
}

std::vector<float> decode(DType t, const std::vector<uint8_t>& block) {
  std::vector<float> y(256);
  ref::dequantize_row(t, block.data(), y.data(), 256);
  return y;
}

std::vector<float> round_trip(DType t, const std::vector<float>& x, const float* importance = nullptr) {
  std::vector<uint8_t> block(size_t(dtype_info(t).block_bytes));
  ref::quantize_row(t, x.data(), block.data(), 256, importance);
  return decode(t, block);
}

// Blocks of random codes (every field's bits random, the scale a sane one) decode to values the
// encoder must find again: the grid entries, signs, deltas and scale codes it picks are the ones
// the bytes held, or others that decode to the same values.
TEST(LatticeEncoders, ValuesABlockHoldsComeBackExactly) {
  std::mt19937 rng(3);
  for (DType t : kLatticeTypes) {
    int exact_blocks = 0;
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<uint8_t> block(size_t(dtype_info(t).block_bytes));
      for (auto& b : block) b = uint8_t(rng());
      set_block_scale(t, block.data(), 0.001f * float(1 + trial));
      const std::vector<float> x = decode(t, block), y = round_trip(t, x);
      double worst = 0, largest = 0;
      for (int i = 0; i < 256; ++i)
        worst = std::max(worst, double(std::fabs(y[i] - x[i]))), largest = std::max(largest, double(std::fabs(x[i])));
      EXPECT_LE(worst, 1e-3 * largest) << dtype_name(t) << " trial " << trial;
      exact_blocks += worst == 0;
    }
    EXPECT_EQ(exact_blocks, 20) << dtype_name(t) << ": blocks that come back bit for bit";
  }
}

// Relative RMS error on Gaussian values: what 1.5 to 3.4 bits a weight can do, and importance
// weights move the error to the values that matter.
TEST(LatticeEncoders, GaussianErrorByTypeAndImportance) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  std::vector<float> x(256);
  for (auto& v : x) v = normal(rng);
  double sum_squares = 0;
  for (float v : x) sum_squares += double(v) * v;
  const struct {
    DType type;
    double max_relative_rms;
  } expected[] = {{DType::IQ3_S, 0.20},   {DType::IQ3_XXS, 0.24}, {DType::IQ2_S, 0.33}, {DType::IQ2_XS, 0.36},
                  {DType::IQ2_XXS, 0.40}, {DType::IQ1_M, 0.55},   {DType::IQ1_S, 0.58}};
  for (const auto& e : expected) {
    const std::vector<float> y = round_trip(e.type, x);
    double err = 0;
    for (int i = 0; i < 256; ++i) err += double(y[i] - x[i]) * (y[i] - x[i]);
    EXPECT_LE(std::sqrt(err / sum_squares), e.max_relative_rms) << dtype_name(e.type);
    EXPECT_GT(err, 0) << dtype_name(e.type);

    // Every third value weighs 100 times the others (within each group of 8): their error falls.
    std::vector<float> importance(256, 1.0f);
    for (int i = 0; i < 256; i += 3) importance[size_t(i)] = 100.0f;
    const std::vector<float> weighted = round_trip(e.type, x, importance.data());
    double before = 0, after = 0;
    for (int i = 0; i < 256; i += 3)
      before += double(y[i] - x[i]) * (y[i] - x[i]), after += double(weighted[i] - x[i]) * (weighted[i] - x[i]);
    EXPECT_LT(after, before) << dtype_name(e.type);
  }
}

// A block of zeros stays zeros (no NaN from a zero scale).
TEST(LatticeEncoders, ZerosStayZeros) {
  const std::vector<float> zeros(256, 0.0f);
  for (DType t : kLatticeTypes) {
    const std::vector<float> y = round_trip(t, zeros);
    for (float v : y) ASSERT_EQ(v, 0.0f) << dtype_name(t);
  }
}

}  // namespace
}  // namespace autoglm
