// Helpers for the tests that run a model: logits at every position of one sequence.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "model/model.h"
#include "model/runner.h"

namespace autoglm::test {

// Logits of every position of `tokens` evaluated from an empty cache in one batch.
inline std::vector<float> forward_all_positions(const Model& m, const std::vector<int32_t>& tokens,
                                                DType kv_type = DType::F16) {
  ThreadPool pool(2);
  ModelRunner runner(m, pool);
  ContiguousKvCache cache(m.spec(), int64_t(tokens.size()) + 1, kv_type);
  Batch b;
  b.caches = {&cache};
  b.add_sequence_tokens(0, tokens.data(), int64_t(tokens.size()), 0, false, true);
  std::vector<float> logits;
  EXPECT_TRUE(runner.forward(b, logits).is_ok());
  return logits;
}

}  // namespace autoglm::test
