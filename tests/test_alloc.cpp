// The decode loop allocates nothing: buffers are planned on the first step and reused.
// Global operator new is replaced here to count heap allocations while a flag is set.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "model/create_model.h"
#include "model/model.h"
#include "model/runner.h"
#include "test_util.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<int64_t> allocations{0};
}  // namespace

void* operator new(size_t n) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) {
  return operator new(n);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, size_t) noexcept {
  std::free(p);
}

namespace autoglm {
namespace {

int32_t argmax(const std::vector<float>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return int32_t(best);
}

class DecodeLoop : public ::testing::TestWithParam<const char*> {};

TEST_P(DecodeLoop, HundredStepsAllocateNothing) {
  CreateModelOptions o;
  o.type = *dtype_from_name(GetParam());
  const std::string path = test::temp_path(std::string("alloc-") + GetParam() + ".gguf");
  ASSERT_TRUE(create_random_model(o, path).is_ok());
  auto model = Model::load(path);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  ThreadPool pool(2);
  ModelRunner runner(**model, pool);
  ContiguousKvCache cache((*model)->spec(), 128);
  Batch step;
  step.caches = {&cache};
  const int32_t first = 1;
  step.add_sequence_tokens(0, &first, 1, 0, true);
  std::vector<float> logits;
  ASSERT_TRUE(runner.forward(step, logits).is_ok());  // the first step plans the buffers

  allocations = 0;
  counting = true;
  bool ok = true;
  for (int32_t pos = 1; pos <= 100 && ok; ++pos) {
    step.tokens[0] = argmax(logits);
    step.positions[0] = pos;
    ok = runner.forward(step, logits).is_ok();
  }
  counting = false;
  ASSERT_TRUE(ok);
  EXPECT_EQ(allocations.load(), 0) << "heap allocations in 100 decode steps";
  // The counter works: an allocation while counting is seen.
  counting = true;
  auto* probe = new std::vector<int>(3);
  counting = false;
  delete probe;
  EXPECT_GE(allocations.load(), 1);
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, DecodeLoop, ::testing::Values("f16", "q4_0", "q8_0", "q4_k", "q6_k"),
                         [](const auto& info) { return test::param_name(info.param); });

}  // namespace
}  // namespace autoglm
