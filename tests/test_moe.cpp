// Mixture-of-experts and latent-attention models: the routing rules, batch invariance,
// decode reading only the chosen experts, and errors that name the key or tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/turn_queue.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "model/create_model.h"
#include "model/expert_ffn.h"
#include "model/expert_routing.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/quantize_model.h"
#include "model/runner.h"
#include "model_test_util.h"
#include "stream_test_util.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {
namespace {

MoeSpec routing(ExpertGating gating, int64_t n_expert, int64_t k) {
  MoeSpec m;
  m.gating = gating;
  m.n_expert = n_expert;
  m.n_expert_used = k;
  return m;
}

TEST(ExpertRouting, SoftmaxTopKRenormalized) {
  const MoeSpec m = routing(ExpertGating::kSoftmax, 4, 2);
  const float logits[] = {0.0f, 2.0f, 1.0f, -1.0f};
  int32_t ids[2];
  float w[2];
  route_experts(m, logits, nullptr, 1, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  // softmax then renormalized over the two: e^2 / (e^2 + e^1)
  EXPECT_NEAR(w[0], std::exp(2.0) / (std::exp(2.0) + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(w[0] + w[1], 1.0, 1e-6);
}

TEST(ExpertRouting, SelectionBiasChoosesButDoesNotWeigh) {
  MoeSpec m = routing(ExpertGating::kSigmoid, 4, 2);
  m.weights_scale = 2.5f;
  const float logits[] = {0.0f, 2.0f, 1.0f, -1.0f};
  const float bias[] = {0.0f, 0.0f, 0.0f, 5.0f};  // expert 3 wins the choice on its bias alone
  int32_t ids[2];
  float w[2];
  route_experts(m, logits, bias, 1, ids, w);
  EXPECT_EQ(ids[0], 3);
  EXPECT_EQ(ids[1], 1);
  const double p3 = 1 / (1 + std::exp(1.0)), p1 = 1 / (1 + std::exp(-2.0));
  EXPECT_NEAR(w[0], 2.5 * p3 / (p3 + p1), 1e-6);
  EXPECT_NEAR(w[1], 2.5 * p1 / (p3 + p1), 1e-6);
}

TEST(ExpertRouting, SoftmaxOverTheSelectedOnly) {
  const MoeSpec m = routing(ExpertGating::kSoftmaxSelected, 4, 2);
  const float logits[] = {3.0f, 1.0f, 2.0f, 0.0f};
  int32_t ids[2];
  float w[2];
  route_experts(m, logits, nullptr, 1, ids, w);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 2);
  EXPECT_NEAR(w[0], std::exp(1.0) / (std::exp(1.0) + 1.0), 1e-6);
}

TEST(ExpertRouting, GroupedTopKKeepsOnlyTheBestGroups) {
  MoeSpec m = routing(ExpertGating::kSigmoid, 8, 2);
  m.n_group = 4;  // groups {0,1} {2,3} {4,5} {6,7}
  m.n_group_used = 1;
  // Expert 0 is the single best, but group {4,5} has the best sum of its two.
  const float logits[] = {4.0f, -4.0f, 0.0f, 0.0f, 3.0f, 3.0f, -1.0f, -1.0f};
  int32_t ids[2];
  float w[2];
  route_experts(m, logits, nullptr, 1, ids, w);
  EXPECT_EQ(ids[0], 4);
  EXPECT_EQ(ids[1], 5);
}

TEST(ExpertRouting, TiesGoToTheLowerId) {
  const MoeSpec m = routing(ExpertGating::kSoftmax, 4, 2);
  const float logits[] = {1.0f, 1.0f, 1.0f, 1.0f};
  int32_t ids[2];
  float w[2];
  route_experts(m, logits, nullptr, 1, ids, w);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 1);
}

const char* kMoeModels[] = {"rand-qwen3moe", "rand-glm4moe", "rand-gpt-oss", "rand-deepseek2-mla"};

std::unique_ptr<Model> load_golden(const std::string& name) {
  auto m = Model::load(test::shared_path("models/random/" + name + ".gguf"));
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m ? std::move(m).value() : nullptr;
}

std::vector<int32_t> some_tokens(int64_t n, int32_t seed) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(int32_t(3 + (seed * 131 + i * 197) % 500));
  return t;
}

class MoeModel : public ::testing::TestWithParam<const char*> {};

// Two sequences in one ragged batch give each sequence's logits bit for bit as alone, and
// a prompt in one batch the same as its tokens one at a time.
void expect_token_results_independent_of_batch(const Model& model) {
  ThreadPool pool(2);
  ModelRunner runner(model, pool);
  const auto a = some_tokens(13, 1), b = some_tokens(9, 2);
  const auto alone = [&](const std::vector<int32_t>& t, bool one_at_a_time) {
    ContiguousKvCache cache(model.spec(), 64, DType::F16);
    std::vector<float> all, logits;
    for (size_t i = 0; i < t.size(); i += one_at_a_time ? 1 : t.size()) {
      Batch batch;
      batch.caches = {&cache};
      const int64_t n = one_at_a_time ? 1 : int64_t(t.size());
      batch.add_sequence_tokens(0, t.data() + i, n, int32_t(i), false, true);
      EXPECT_TRUE(runner.forward(batch, logits).is_ok());
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  };
  ContiguousKvCache ca(model.spec(), 64, DType::F16), cb(model.spec(), 64, DType::F16);
  Batch both;
  both.caches = {&ca, &cb};
  both.add_sequence_tokens(0, a.data(), int64_t(a.size()), 0, false, true);
  both.add_sequence_tokens(1, b.data(), int64_t(b.size()), 0, false, true);
  std::vector<float> together;
  ASSERT_TRUE(runner.forward(both, together).is_ok());
  const size_t va = a.size() * size_t(model.spec().n_vocab);
  EXPECT_EQ(std::vector<float>(together.begin(), together.begin() + long(va)), alone(a, false));
  EXPECT_EQ(std::vector<float>(together.begin() + long(va), together.end()), alone(b, false));
  EXPECT_EQ(alone(a, false), alone(a, true));
}

TEST_P(MoeModel, TokenResultDoesNotDependOnItsBatch) {
  AUTOGLM_REQUIRE_SHARED("models/random/rand-qwen3moe.gguf");
  auto model = load_golden(GetParam());
  ASSERT_TRUE(model);
  expect_token_results_independent_of_batch(*model);
}

// One decode step multiplies exactly n_expert_used experts per MoE layer: the bytes of
// those experts' three matrices, nothing of the others.
TEST_P(MoeModel, DecodeReadsOnlyTheChosenExperts) {
  AUTOGLM_REQUIRE_SHARED("models/random/rand-qwen3moe.gguf");
  auto model = load_golden(GetParam());
  ASSERT_TRUE(model);
  const ModelSpec& s = model->spec();
  ThreadPool pool(2);
  ModelRunner runner(*model, pool);
  ContiguousKvCache cache(s, 64, DType::F16);
  const auto prompt = some_tokens(6, 3);
  Batch first;
  first.caches = {&cache};
  first.add_sequence_tokens(0, prompt.data(), int64_t(prompt.size()), 0, true);
  std::vector<float> logits;
  ASSERT_TRUE(runner.forward(first, logits).is_ok());
  int64_t per_expert = 0, moe_layers = 0;
  for (int64_t il = 0; il < s.n_layer; ++il) {
    if (!s.moe.is_moe_layer(il)) continue;
    const ExpertWeights& x = model->weights().layers[size_t(il)].experts;
    per_expert =
        x.gate[0].rows * x.gate[0].row_bytes + x.up[0].rows * x.up[0].row_bytes + x.down[0].rows * x.down[0].row_bytes;
    ++moe_layers;
  }
  ASSERT_GT(moe_layers, 0);
  const int64_t before = expert_weight_bytes_read();
  Batch step;
  step.caches = {&cache};
  const int32_t next = 7;
  step.add_sequence_tokens(0, &next, 1, int32_t(prompt.size()), true);
  ASSERT_TRUE(runner.forward(step, logits).is_ok());
  const int64_t read = expert_weight_bytes_read() - before;
  EXPECT_EQ(read, moe_layers * s.moe.n_expert_used * per_expert)
      << "expected " << s.moe.n_expert_used << " of " << s.moe.n_expert << " experts in each of " << moe_layers
      << " layers";
}

// The serving engine on these models: concurrent requests past gpt-oss's 24-token window, with
// preemption under a small KV pool and the prefix cache on, each give what the single-sequence
// generator gives alone (full-attention layers of gpt-oss keep every block).
TEST_P(MoeModel, EngineRequestsEqualEachAlone) {
  AUTOGLM_REQUIRE_SHARED("models/random/rand-qwen3moe.gguf");
  auto model = load_golden(GetParam());
  ASSERT_TRUE(model);
  auto tok = Tokenizer::from_gguf(model->file());
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  ThreadPool pool(2);
  EngineConfig cfg;
  cfg.kv_blocks = 12;  // 192 positions for 4 requests of 70: some wait or are preempted
  cfg.block_size = 16;
  cfg.max_running = 4;
  cfg.max_batch_tokens = 32;
  Engine engine(*model, **tok, pool, cfg);
  std::vector<GenerationRequest> requests;
  std::vector<std::shared_ptr<StreamHandle>> handles;
  {
    // No step runs until all four are queued (the engine steps on the pool's turns), so they
    // overlap and the pool must preempt, however the threads are scheduled.
    TurnQueue::Seat seat(pool.turns());
    const TurnQueue::Turn hold = seat.take();
    for (int i = 0; i < 4; ++i) {
      GenerationRequest r;
      r.prompt = some_tokens(30 + 3 * i, i % 2);  // two pairs share a prefix
      r.max_tokens = 40;
      r.sampling.temperature = 0;
      requests.push_back(r);
      handles.push_back(*engine.submit(r));
    }
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    const std::vector<int32_t> got = test::collect(*handles[i]).tokens;
    Generator gen(*model, **tok, pool, 256);
    auto alone = gen.generate(requests[i]);
    ASSERT_TRUE(alone.is_ok());
    EXPECT_EQ(got, alone->tokens) << "request " << i;
  }
  // The pool was too small for all four at once, and a prompt just served is served again from
  // the prefix cache (its blocks are the most recently freed): both paths ran, not only the plain one.
  EXPECT_GT(engine.stats().preemptions.load(), 0) << "no request was preempted";
  const auto run_alone = [&](const GenerationRequest& r) {
    auto handle = engine.submit(r);
    EXPECT_TRUE(handle.is_ok()) << handle.status().message();
    return handle.is_ok() ? test::collect(**handle).tokens : std::vector<int32_t>{};
  };
  run_alone(requests[0]);
  const int64_t hits_before = engine.stats().prefix_hit_tokens.load();
  const std::vector<int32_t> repeated = run_alone(requests[0]);
  EXPECT_GE(engine.stats().prefix_hit_tokens.load() - hits_before, cfg.block_size)
      << "the repeated prompt's blocks were not taken from the prefix cache";
  Generator gen(*model, **tok, pool, 256);
  auto alone = gen.generate(requests[0]);
  ASSERT_TRUE(alone.is_ok());
  EXPECT_EQ(repeated, alone->tokens) << "the repeated request, from the prefix cache";
}

// Experts in the packed integer types (the golden models' are F32 and MXFP4): a qwen3moe
// whose matrices are all of one type gives the logits of the same weights dequantized to F32,
// within what the kernels' int8 activations cost (a wrong block decode, scale or expert row
// is off by the logits' own size), and a token's result does not depend on its batch.
class MoeQuantizedExperts : public ::testing::TestWithParam<DType> {};

TEST_P(MoeQuantizedExperts, MatchTheirDequantizedWeightsAndBatchInvariance) {
  const DType type = GetParam();
  CreateModelOptions o;
  o.arch = "qwen3moe";
  o.type = type;
  o.n_layer = 2;
  const std::string path = test::temp_path("moe-experts.gguf");
  ASSERT_TRUE(create_random_model(o, path).is_ok());
  auto quantized = Model::load(path);
  ASSERT_TRUE(quantized.is_ok()) << quantized.status().message();
  EXPECT_EQ((*quantized)->file().find_tensor("blk.1.ffn_down_exps.weight")->type, type);
  ThreadPool pool(2);
  QuantizeOptions to_f32;
  to_f32.type = DType::F32;
  to_f32.keep_type = std::nullopt;
  auto dequantized_file = quantize_file((*quantized)->file(), to_f32, pool);
  ASSERT_TRUE(dequantized_file.is_ok()) << dequantized_file.status().message();
  auto dequantized = Model::from_gguf(std::move(dequantized_file).value());
  ASSERT_TRUE(dequantized.is_ok()) << dequantized.status().message();
  EXPECT_EQ((*dequantized)->file().find_tensor("blk.1.ffn_down_exps.weight")->type, DType::F32);

  // Each token alone (position 0), so that a near tie in the router that picks another expert
  // for one token (about 0.2 off there) does not reach the others through attention; a wrong
  // decode, scale or expert row would be off for every token.
  const auto tokens = some_tokens(24, 3);
  std::vector<float> got, want;
  for (int32_t token : tokens) {
    const auto g = test::forward_all_positions(**quantized, {token}, DType::F32);
    const auto w = test::forward_all_positions(**dequantized, {token}, DType::F32);
    got.insert(got.end(), g.begin(), g.end());
    want.insert(want.end(), w.begin(), w.end());
  }
  ASSERT_EQ(got.size(), want.size());
  const size_t n_vocab = size_t((*quantized)->spec().n_vocab);
  std::vector<double> errors;
  size_t same_top = 0;
  for (size_t row = 0; row < tokens.size(); ++row) {
    const float* g = &got[row * n_vocab];
    const float* w = &want[row * n_vocab];
    double diff2 = 0, want2 = 0;
    for (size_t v = 0; v < n_vocab; ++v) diff2 += double(g[v] - w[v]) * (g[v] - w[v]), want2 += double(w[v]) * w[v];
    errors.push_back(std::sqrt(diff2 / want2));
    same_top += std::max_element(g, g + n_vocab) - g == std::max_element(w, w + n_vocab) - w;
  }
  const std::string name(dtype_name(type));
  std::printf("[%s experts vs dequantized] relative rms by token:", name.c_str());
  for (double e : errors) std::printf(" %.3f", e);
  std::printf("; top-1 %zu/%zu\n", same_top, tokens.size());
  std::sort(errors.begin(), errors.end());
  EXPECT_LT(errors[errors.size() * 3 / 4], 0.03) << name << ": three tokens in four";
  EXPECT_GE(same_top * 4, tokens.size() * 3) << name;
  expect_token_results_independent_of_batch(**quantized);
  std::remove(path.c_str());
}

// Quantized experts beside a shared expert (glm4moe, deepseek2): two sequences decoding one token
// each in one batch give each its logits alone. The routed experts' input is the tokens' rows of x
// in place where an expert has one row, and the shared expert's input is all of x: the two must
// not be taken for one input (only token 0's row would then be converted for the shared expert).
class MoeQuantizedSharedExpert : public ::testing::TestWithParam<const char*> {};

TEST_P(MoeQuantizedSharedExpert, TwoDecodesInOneBatchEqualEachAlone) {
  CreateModelOptions o;
  o.arch = GetParam();
  o.type = DType::Q4_K;
  o.n_layer = 3;
  const std::string path = test::temp_path(std::string("moe-shared-") + GetParam() + ".gguf");
  ASSERT_TRUE(create_random_model(o, path).is_ok());
  auto model = Model::load(path);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  ASSERT_GT((*model)->weights().layers.back().experts.shared_gate.rows, 0) << GetParam() << " has no shared expert";
  ThreadPool pool(2);
  ModelRunner runner(**model, pool);
  const ModelSpec& s = (*model)->spec();
  const size_t n_vocab = size_t(s.n_vocab);
  for (int32_t seed = 0; seed < 4; ++seed) {
    const auto tokens = some_tokens(2, 10 + seed);
    std::vector<std::vector<float>> alone;
    for (int32_t t : tokens) {
      ContiguousKvCache cache(s, 8, DType::F16);
      Batch one;
      one.caches = {&cache};
      one.add_sequence_tokens(0, &t, 1, 0, false, true);
      std::vector<float> logits;
      ASSERT_TRUE(runner.forward(one, logits).is_ok());
      alone.push_back(logits);
    }
    ContiguousKvCache c0(s, 8, DType::F16), c1(s, 8, DType::F16);
    Batch both;
    both.caches = {&c0, &c1};
    both.add_sequence_tokens(0, &tokens[0], 1, 0, false, true);
    both.add_sequence_tokens(1, &tokens[1], 1, 0, false, true);
    std::vector<float> together;
    ASSERT_TRUE(runner.forward(both, together).is_ok());
    ASSERT_EQ(together.size(), 2 * n_vocab);
    EXPECT_EQ(std::vector<float>(together.begin(), together.begin() + long(n_vocab)), alone[0]) << "seed " << seed;
    EXPECT_EQ(std::vector<float>(together.begin() + long(n_vocab), together.end()), alone[1]) << "seed " << seed;
  }
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Archs, MoeQuantizedSharedExpert, ::testing::Values("glm4moe", "deepseek2"),
                         [](const auto& info) { return test::param_name(info.param); });

INSTANTIATE_TEST_SUITE_P(Types, MoeQuantizedExperts,
                         ::testing::Values(DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q2_K,
                                           DType::Q3_K, DType::IQ4_XS, DType::IQ4_NL, DType::TQ2_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

INSTANTIATE_TEST_SUITE_P(Golden, MoeModel, ::testing::ValuesIn(kMoeModels),
                         [](const auto& info) { return test::param_name(info.param); });

// Latent attention caches one head [latent | rope key] per position and no separate values:
// the values are read from the key rows' latent.
TEST(MoeKv, LatentAttentionStoresOnlyTheLatentAndTheRopeKey) {
  AUTOGLM_REQUIRE_SHARED("models/random/rand-deepseek2-mla.gguf");
  auto model = load_golden("rand-deepseek2-mla");
  ASSERT_TRUE(model);
  const ModelSpec& s = model->spec();
  auto f = kv_format(s, DType::F16);
  ASSERT_TRUE(f.is_ok());
  EXPECT_TRUE(f->values_in_keys);
  EXPECT_EQ(f->value_bytes(), 0);
  EXPECT_EQ(f->k_row_bytes, (s.mla.kv_lora_rank + s.n_rot) * 2);  // 64 + 16 f16 values, not n_head * (48 + 32)
  ContiguousKvCache cache(s, 8, DType::F16);
  EXPECT_EQ(cache.value_span(1, 0), cache.key_span(1, 0));
}

// The golden qwen3moe file with one metadata value or one tensor's shape changed.
Result<std::unique_ptr<Model>> load_altered(const std::vector<std::pair<std::string, int64_t>>& keys,
                                            const std::string& tensor = "") {
  auto f = GgufFile::open(test::shared_path("models/random/rand-qwen3moe.gguf"));
  EXPECT_TRUE(f.is_ok());
  std::vector<std::pair<std::string, GgufValue>> kv = (*f)->metadata();
  for (const auto& [key, value] : keys) {  // set, or add where the file lacks the key
    auto it = std::find_if(kv.begin(), kv.end(), [&](const auto& e) { return e.first == key; });
    if (it == kv.end()) it = kv.insert(kv.end(), {key, GgufValue::u32(0)});
    it->second = GgufValue::u32(uint32_t(value));
  }
  std::vector<GgufTensorInfo> tensors = (*f)->tensors();
  for (auto& t : tensors)
    if (t.name == tensor) {  // claim half the experts
      t.dims[2] /= 2;
      t.n_bytes /= 2;
    }
  std::shared_ptr<const GgufFile> keep = std::move(f).value();  // the mapping the tensors point into
  auto altered = GgufFile::from_parts("altered.gguf", std::move(kv), std::move(tensors), keep);
  if (!altered) return altered.status();
  return Model::from_gguf(std::move(altered).value());
}

TEST(MoeErrors, ExpertCountsAndShapesNameTheCulprit) {
  AUTOGLM_REQUIRE_SHARED("models/random/rand-qwen3moe.gguf");
  auto too_many = load_altered({{"qwen3moe.expert_used_count", 9}});
  ASSERT_FALSE(too_many.is_ok());
  EXPECT_NE(too_many.status().message().find("qwen3moe.expert_used_count"), std::string::npos)
      << too_many.status().message();
  auto shape = load_altered({}, "blk.1.ffn_up_exps.weight");
  ASSERT_FALSE(shape.is_ok());
  EXPECT_NE(shape.status().message().find("blk.1.ffn_up_exps.weight"), std::string::npos) << shape.status().message();
  EXPECT_NE(shape.status().message().find("[128, 64, 8]"), std::string::npos) << shape.status().message();
  // expert_count says 16 where the tensors hold 8: the error names the first that disagrees (the
  // router) and the shape the key implies.
  auto count = load_altered({{"qwen3moe.expert_count", 16}});
  ASSERT_FALSE(count.is_ok());
  EXPECT_NE(count.status().message().find("blk.0.ffn_gate_inp.weight"), std::string::npos) << count.status().message();
  EXPECT_NE(count.status().message().find("expected [128, 16]"), std::string::npos) << count.status().message();
  // 8 experts in 8 groups, 1 group kept: 1 eligible expert for a top-2.
  auto groups = load_altered({{"qwen3moe.expert_group_count", 8}, {"qwen3moe.expert_group_used_count", 1}});
  ASSERT_FALSE(groups.is_ok());
  EXPECT_NE(groups.status().message().find("qwen3moe.expert_group_used_count"), std::string::npos)
      << groups.status().message();
}

TEST(MoeErrors, UnknownArchitectureListsTheSupported) {
  AUTOGLM_REQUIRE_SHARED("models/random/rand-qwen3moe.gguf");
  auto m = Model::load(test::shared_path("models/random/rand-qwen3moe.gguf"), "qwen9moe");
  ASSERT_FALSE(m.is_ok());
  for (const char* name : {"qwen9moe", "qwen3moe", "glm4moe", "gpt-oss", "deepseek2"})
    EXPECT_NE(m.status().message().find(name), std::string::npos) << m.status().message();
}

// An adapter over the attention and the dense layer of a MoE model applies; one that names a
// routed-expert tensor, or a dense FFN tensor of a layer that has experts instead, is refused
// with the tensor's name.
TEST(MoeLora, AttentionAndDenseLayersOnlyExpertsRefused) {
  AUTOGLM_REQUIRE_SHARED("models/random/rand-glm4moe.gguf");
  const std::string base_path = test::shared_path("models/random/rand-glm4moe.gguf");
  auto model = load_golden("rand-glm4moe");
  ASSERT_TRUE(model);
  const std::string adapter = test::temp_path("glm4moe-lora.gguf");
  ASSERT_TRUE(create_random_lora(base_path, 4, 8.0f, 1, adapter).is_ok());
  auto lora = load_lora(adapter, *model);
  ASSERT_TRUE(lora.is_ok()) << lora.status().message();
  ThreadPool pool(2);
  ModelRunner runner(*model, pool);
  const auto tokens = some_tokens(5, 4);
  std::vector<float> plain, adapted;
  const LoraSet set{*lora};
  for (bool with : {false, true}) {
    ContiguousKvCache cache(model->spec(), 16, DType::F16);
    Batch b;
    b.caches = {&cache};
    if (with) b.loras = {&set};
    b.add_sequence_tokens(0, tokens.data(), int64_t(tokens.size()), 0, true);
    ASSERT_TRUE(runner.forward(b, with ? adapted : plain).is_ok());
  }
  EXPECT_NE(plain, adapted);

  for (const std::string tensor : {"blk.1.ffn_up_exps.weight", "blk.1.ffn_up.weight"}) {
    GgufWriter w;
    w.set("general.architecture", GgufValue::string("glm4moe"));
    w.set("general.type", GgufValue::string("adapter"));
    w.set("adapter.type", GgufValue::string("lora"));
    w.set("adapter.lora.alpha", GgufValue::f32(4.0f));
    ASSERT_TRUE(w.add_tensor(tensor + ".lora_a", DType::F32, {128, 4}, std::vector<uint8_t>(128 * 4 * 4)).is_ok());
    ASSERT_TRUE(w.add_tensor(tensor + ".lora_b", DType::F32, {4, 64}, std::vector<uint8_t>(4 * 64 * 4)).is_ok());
    const std::string path = test::temp_path("bad-lora.gguf");
    ASSERT_TRUE(w.write(path).is_ok());
    auto refused = load_lora(path, *model);
    ASSERT_FALSE(refused.is_ok()) << tensor;
    EXPECT_NE(refused.status().message().find(tensor), std::string::npos) << refused.status().message();
  }
}

}  // namespace
}  // namespace autoglm
