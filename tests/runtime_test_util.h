// Tests of the public Runtime API on the bundled tiny model: stories260K opened with 2 threads
// and a 16 MiB KV pool (a fixture may change the options), and a greedy text request.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "autoglm/runtime.h"
#include "test_util.h"

namespace autoglm::test {

class StoriesRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
    auto r = Runtime::open(shared_path("models/stories260K.gguf"), options());
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    rt = std::move(r).value();
  }
  virtual RuntimeOptions options() const {
    RuntimeOptions o;
    o.threads = 2;
    o.kv_memory_mib = 16;
    return o;
  }
  static Request greedy(const std::string& text, int32_t n) {
    Request r;
    r.text = text;
    r.max_tokens = n;
    r.sampling.temperature = 0;
    return r;
  }
  std::unique_ptr<Runtime> rt;
};

}  // namespace autoglm::test
