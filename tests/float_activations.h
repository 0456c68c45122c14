// For the test programs that compare BF16 weights with a float-activation reference (the
// float64 transformers references): their activations stay floats. By default they are rounded
// to BF16 where the CPU has AVX512-BF16 (cpu::Bf16Activations::kAuto), which moves the logits by
// more than those tolerances.
#pragma once

#include <gtest/gtest.h>

#include "kernels/cpu/matmul.h"

namespace autoglm::test {

class FloatActivations : public ::testing::Environment {
 public:
  void SetUp() override { cpu::set_bf16_activations(cpu::Bf16Activations::kOff); }
  void TearDown() override { cpu::set_bf16_activations(cpu::Bf16Activations::kAuto); }
};

// Including this header pins float activations for the whole test program.
inline ::testing::Environment* const kFloatActivations = ::testing::AddGlobalTestEnvironment(new FloatActivations);

}  // namespace autoglm::test
