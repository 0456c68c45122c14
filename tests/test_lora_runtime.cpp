// LoRA adapters through the public Runtime API on stories260K: a batch of 8 requests over 3
// adapters and the base gives each request the text it gets alone; the prefix cache never
// shares KV across adapters; adapters load and unload while requests run; max_loras evicts
// the least recently used idle adapter; the options' adapters apply to every request.
#include <gtest/gtest.h>

#include <thread>

#include "autoglm/runtime.h"
#include "lora_test_util.h"
#include "model/model.h"
#include "runtime/lora_registry.h"
#include "test_util.h"

namespace autoglm {
namespace {

class LoraRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
    path = test::shared_path("models/stories260K.gguf");
    auto base = Model::load(path);
    ASSERT_TRUE(base.is_ok());
    for (int i = 0; i < 3; ++i) {
      adapters.push_back(test::test_temp("rt-lora-" + std::to_string(i) + ".gguf"));
      test::write_gguf_adapter(adapters.back(), "llama", test::random_pairs(**base, test::kLoraAll, 4, 10 + i), 16.0f);
    }
  }
  std::unique_ptr<Runtime> open(int max_loras = 8, std::vector<LoraOption> lora = {}) {
    RuntimeOptions o;
    o.threads = 2;
    o.kv_memory_mib = 16;
    o.max_loras = max_loras;
    o.lora = std::move(lora);
    auto r = Runtime::open(path, o);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return r ? std::move(r).value() : nullptr;
  }
  static Request greedy(const std::string& text, int32_t n, const std::string& lora = "") {
    Request r;
    r.text = text;
    r.max_tokens = n;
    r.sampling.temperature = 0;
    r.ignore_eos = true;
    r.lora = lora;
    return r;
  }
  std::string path;
  std::vector<std::string> adapters;
};

TEST_F(LoraRuntime, EightRequestsOverThreeAdaptersAndTheBaseGetWhatTheyGetAlone) {
  auto rt = open();
  const std::vector<std::string> names = {"", "a", "b", "c"};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(rt->load_lora(names[size_t(i + 1)], adapters[size_t(i)]).is_ok());
  std::vector<Request> requests;
  for (int i = 0; i < 8; ++i)
    requests.push_back(greedy(i < 4 ? "Once upon a time" : "The little dog", 24 + i, names[size_t(i % 4)]));
  std::vector<std::shared_ptr<StreamHandle>> handles;
  for (const Request& r : requests) handles.push_back(rt->submit(r).value());
  std::vector<std::string> together;
  for (auto& h : handles) {
    std::string text;
    StreamEvent ev;
    while (h->next(ev)) {
      text += ev.text;
      if (ev.finished) break;
    }
    together.push_back(text);
  }
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(together[i], rt->generate_text(requests[i]).value()) << i;
  for (size_t i = 1; i < 4; ++i) EXPECT_NE(together[i], together[0]) << "adapter " << names[i] << " changes nothing";
}

TEST_F(LoraRuntime, ThePrefixCacheIsNotSharedAcrossAdapters) {
  auto rt = open();
  ASSERT_TRUE(rt->load_lora("a", adapters[0]).is_ok());
  ASSERT_TRUE(rt->load_lora("b", adapters[1]).is_ok());
  const std::string prompt =
      "Once upon a time there was a little girl named Lily who loved to play outside in the sun with her dog";
  auto hits = [&] { return rt->stats().prefix_hit_tokens; };
  ASSERT_TRUE(rt->generate_text(greedy(prompt, 2, "a")).is_ok());
  const int64_t first = hits();
  ASSERT_TRUE(rt->generate_text(greedy(prompt, 2, "b")).is_ok());
  EXPECT_EQ(hits(), first);  // b reuses nothing a computed
  ASSERT_TRUE(rt->generate_text(greedy(prompt, 2, "")).is_ok());
  EXPECT_EQ(hits(), first);  // nor does the base
  ASSERT_TRUE(rt->generate_text(greedy(prompt, 2, "a")).is_ok());
  EXPECT_GT(hits(), first);  // a again does
}

TEST_F(LoraRuntime, AdaptersLoadAndUnloadWhileRequestsRun) {
  auto rt = open();
  ASSERT_TRUE(rt->load_lora("a", adapters[0]).is_ok());
  const std::string alone = rt->generate_text(greedy("Once upon a time", 200, "a")).value();
  std::vector<std::shared_ptr<StreamHandle>> running;
  for (int i = 0; i < 3; ++i) running.push_back(rt->submit(greedy("Once upon a time", 200, "a")).value());
  ASSERT_TRUE(rt->load_lora("b", adapters[1]).is_ok());
  EXPECT_TRUE(rt->unload_lora("a").is_ok());  // the running requests finish with it
  for (auto& h : running) {
    std::string text;
    StreamEvent ev;
    while (h->next(ev)) {
      text += ev.text;
      if (ev.finished) break;
    }
    EXPECT_EQ(text, alone);
  }
  EXPECT_EQ(rt->submit(greedy("x", 2, "a")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(rt->unload_lora("nope").code(), StatusCode::kNotFound);
  EXPECT_FALSE(rt->load_lora("b", adapters[1]).is_ok());  // the name is taken
  ASSERT_EQ(rt->loras().size(), 1u);
  EXPECT_EQ(rt->loras()[0].name, "b");
  auto base = Model::load(path);
  const std::string wrong = test::test_temp("rt-lora-wrong.gguf");
  auto pairs = test::random_pairs(**base, {"attn_q.weight"}, 4, 3);
  pairs[0].n_in *= 2;
  pairs[0].a.resize(size_t(pairs[0].rank * pairs[0].n_in));
  test::write_gguf_adapter(wrong, "llama", pairs, 4.0f);
  const Status mismatch = rt->load_lora("w", wrong);
  EXPECT_NE(mismatch.message().find("blk.0.attn_q.weight.lora_a"), std::string::npos) << mismatch.message();
}

// max_loras 2: loading a third unloads the least recently used adapter no request holds; one
// held is never unloaded; an unloaded one is read again when named.
TEST_F(LoraRuntime, MaxLorasEvictsTheLeastRecentlyUsedIdleAdapter) {
  auto base = Model::load(path);
  ASSERT_TRUE(base.is_ok());
  LoraRegistry registry(**base, 2);
  ASSERT_TRUE(registry.add("a", adapters[0], 1).is_ok());
  ASSERT_TRUE(registry.add("b", adapters[1], 1).is_ok());
  ASSERT_TRUE(registry.acquire("a").is_ok());  // a is now the more recently used
  ASSERT_TRUE(registry.add("c", adapters[2], 1).is_ok());
  auto resident = [&](const std::string& name) {
    for (const auto& i : registry.list())
      if (i.name == name) return i.resident;
    return false;
  };
  EXPECT_TRUE(resident("a"));
  EXPECT_FALSE(resident("b"));
  EXPECT_TRUE(resident("c"));
  auto held = registry.acquire("a");  // a request holds a
  ASSERT_TRUE(held.is_ok());
  auto b = registry.acquire("b");  // read again: c (idle) goes, not a
  ASSERT_TRUE(b.is_ok());
  EXPECT_TRUE(resident("a"));
  EXPECT_TRUE(resident("b"));
  EXPECT_FALSE(resident("c"));
  EXPECT_EQ(registry.acquire("c").status().code(), StatusCode::kResourceExhausted);  // a and b are both held
  b->reset();
  EXPECT_TRUE(registry.acquire("c").is_ok());
  EXPECT_EQ(registry.acquire("nope").status().code(), StatusCode::kNotFound);
}

TEST_F(LoraRuntime, TheOptionsAdaptersApplyToEveryRequestAndToLogits) {
  auto plain = open();
  auto adapted = open(8, {{adapters[0], 1.0f}});
  ASSERT_TRUE(plain->load_lora("a", adapters[0]).is_ok());
  const Request r = greedy("Once upon a time", 16);
  EXPECT_EQ(adapted->generate_text(r).value(), plain->generate_text(greedy("Once upon a time", 16, "a")).value());
  const std::vector<int32_t> tokens = adapted->encode("Once upon a time");
  EXPECT_EQ(adapted->logits(tokens).value(), plain->logits(tokens, true, "a").value());
  EXPECT_NE(plain->logits(tokens).value(), plain->logits(tokens, true, "a").value());
  RuntimeOptions bad;
  bad.lora = {{"/no/such/adapter.gguf", 1.0f}};
  auto refused = Runtime::open(path, bad);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("lora: /no/such/adapter.gguf"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace autoglm
