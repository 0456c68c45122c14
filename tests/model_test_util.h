// Helpers for the tests that run a model: logits at every position of one sequence.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "model/model.h"
#include "model/runner.h"

namespace autoglm::test {

// The device the model tests run on: AUTOGLM_TEST_DEVICE (scripts/cuda-check.sh sets cuda on a
// GPU machine), else the CPU. A bad value fails the test that asks.
inline Device test_device() {
  const char* name = std::getenv("AUTOGLM_TEST_DEVICE");
  auto device = parse_device(name && *name ? name : "cpu");
  EXPECT_TRUE(device.is_ok()) << "AUTOGLM_TEST_DEVICE: " << device.status().message();
  return device ? *device : Device{};
}

// A model loaded on test_device().
inline Result<std::unique_ptr<Model>> load_on_test_device(const std::string& path) {
  ModelLoadOptions options;
  options.device = test_device();
  return Model::load(path, options);
}

// Logits of every position of `tokens` evaluated from an empty cache in one batch.
inline std::vector<float> forward_all_positions(const Model& m, const std::vector<int32_t>& tokens,
                                                DType kv_type = DType::F16) {
  ThreadPool pool(2);
  ModelRunner runner(m, pool);
  ContiguousKvCache cache(m.spec(), int64_t(tokens.size()) + 1, kv_type, m.device());
  Batch b;
  b.caches = {&cache};
  b.add_sequence_tokens(0, tokens.data(), int64_t(tokens.size()), 0, false, true);
  std::vector<float> logits;
  EXPECT_TRUE(runner.forward(b, logits).is_ok());
  return logits;
}

}  // namespace autoglm::test
