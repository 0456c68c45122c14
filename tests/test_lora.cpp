// LoRA adapters: logits of a base model with an adapter equal those of the model merged by this
// test (in double, stored as f32) within the golden F32 tolerance, for a GGUF base and a Hugging
// Face folder base, a GGUF adapter and a PEFT folder, rsLoRA on and off; the bare base in the
// same batch is unchanged bit for bit; bad adapters are errors naming the tensor or the key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/half.h"
#include "float_activations.h"
#include "formats/gguf.h"
#include "lora_test_util.h"
#include "model/create_model.h"
#include "model/lora.h"
#include "model/lora_merge.h"
#include "model/model.h"
#include "model/runner.h"
#include "test_util.h"

namespace autoglm {
namespace {

using json = nlohmann::json;
using test::bytes_of;
using test::kLoraAll;
using test::Pair;
using test::random_pairs;
using test::write_gguf_adapter;
using test::write_peft_adapter;

std::vector<double> to_doubles(const GgufTensorInfo& t) {
  std::vector<double> out(size_t(t.n_elements()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.type == DType::F32) {
      float f;
      std::memcpy(&f, t.data + 4 * i, 4);
      out[i] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      out[i] = t.type == DType::F16 ? fp16_to_float(h) : bf16_to_float(h);
    }
  }
  return out;
}

// The base with W + scale * B A for every pair, computed in double and stored as F32.
void write_merged(const std::string& path, const Model& base, const std::vector<Pair>& pairs, double scale) {
  GgufWriter w;
  for (const auto& [k, v] : base.file().metadata()) w.set(k, v);
  for (const GgufTensorInfo& t : base.file().tensors()) {
    const Pair* pair = nullptr;
    for (const Pair& p : pairs)
      if (p.weight == t.name) pair = &p;
    if (!pair) {
      ASSERT_TRUE(w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes)).is_ok());
      continue;
    }
    ASSERT_TRUE(t.type == DType::F32 || t.type == DType::F16 || t.type == DType::BF16) << t.name;
    std::vector<double> m = to_doubles(t);
    std::vector<float> merged(m.size());
    for (int64_t o = 0; o < pair->n_out; ++o)
      for (int64_t i = 0; i < pair->n_in; ++i) {
        double d = 0;
        for (int64_t r = 0; r < pair->rank; ++r)
          d += double(pair->b[size_t(o * pair->rank + r)]) * double(pair->a[size_t(r * pair->n_in + i)]);
        merged[size_t(o * pair->n_in + i)] = float(m[size_t(o * pair->n_in + i)] + scale * d);
      }
    ASSERT_TRUE(w.add_tensor(t.name, DType::F32, t.dims, bytes_of(merged)).is_ok());
  }
  ASSERT_TRUE(w.write(path).is_ok());
}

// Logits at every position of each sequence, run in one batch; `sets[i]` the adapters of
// sequence i (null: none).
std::vector<std::vector<float>> batch_logits(const Model& m, const std::vector<std::vector<int32_t>>& prompts,
                                             const std::vector<const LoraSet*>& sets) {
  ThreadPool pool(2);
  ModelRunner runner(m, pool);
  std::vector<std::unique_ptr<ContiguousKvCache>> caches;
  Batch b;
  for (size_t i = 0; i < prompts.size(); ++i) {
    caches.push_back(std::make_unique<ContiguousKvCache>(m.spec(), int64_t(prompts[i].size()) + 1, DType::F32));
    b.caches.push_back(caches.back().get());
    b.add_sequence_tokens(int32_t(i), prompts[i].data(), int64_t(prompts[i].size()), 0, false, true);
  }
  b.loras = sets;
  std::vector<float> logits;
  EXPECT_TRUE(runner.forward(b, logits).is_ok());
  std::vector<std::vector<float>> out;
  const int64_t V = m.spec().n_vocab;
  size_t at = 0;
  for (const auto& p : prompts) {
    out.emplace_back(logits.begin() + int64_t(at) * V, logits.begin() + int64_t(at + p.size()) * V);
    at += p.size();
  }
  return out;
}

struct Tolerance {
  double max_abs, rms;
};

// The golden tolerance of the F32 random llama case (rand-llama-gqa-f32).
Tolerance f32_tolerance() {
  std::ifstream f(test::shared_path("golden/index.json"));
  const json index = json::parse(f);
  for (const json& c : index.is_array() ? index : index["cases"])
    if (c["name"] == "rand-llama-gqa-f32") return {c["tolerance"]["max_abs"], c["tolerance"]["rms"]};
  ADD_FAILURE() << "golden/index.json has no rand-llama-gqa-f32 case";
  return {0, 0};
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  const Tolerance tol = f32_tolerance();
  double max_abs = 0, sq = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(double(got[i]) - double(want[i]));
    max_abs = std::max(max_abs, d);
    sq += d * d;
  }
  EXPECT_LE(max_abs, tol.max_abs) << what;
  EXPECT_LE(std::sqrt(sq / double(got.size())), tol.rms) << what;
}

std::string temp(const std::string& name) {
  return test::test_temp("lora-" + name);
}

// Runs one adapter file against its merged model, and checks that the adapter changes the
// logits at all (the comparison would pass trivially otherwise).
void check_against_merged(const Model& base, const std::string& adapter_path, const std::vector<Pair>& pairs,
                          double scale, const std::string& what) {
  auto adapter = load_lora(adapter_path, base);
  ASSERT_TRUE(adapter.is_ok()) << adapter.status().message();
  EXPECT_NEAR((*adapter)->scale, scale, 1e-6);
  const std::string merged_path = temp("merged.gguf");
  write_merged(merged_path, base, pairs, scale);
  auto merged = Model::load(merged_path);
  ASSERT_TRUE(merged.is_ok()) << merged.status().message();
  const std::vector<int32_t> prompt = {1, 5, 9, 2, 7, 3, 11, 4};
  const LoraSet set = {*adapter};
  const auto with = batch_logits(base, {prompt}, {&set});
  const auto want = batch_logits(**merged, {prompt}, {nullptr});
  const auto bare = batch_logits(base, {prompt}, {nullptr});
  expect_close(with[0], want[0], what);
  double moved = 0;
  for (size_t i = 0; i < bare[0].size(); ++i) moved = std::max(moved, double(std::fabs(bare[0][i] - want[0][i])));
  EXPECT_GT(moved, 10 * f32_tolerance().max_abs) << what << ": the adapter barely changes the logits";
}

TEST(Lora, AGgufAdapterOnAGgufBaseMatchesTheMergedModel) {
  CreateModelOptions o;
  o.type = DType::F32;
  const std::string base_path = temp("base.gguf");
  ASSERT_TRUE(create_random_model(o, base_path).is_ok());
  auto base = Model::load(base_path);
  ASSERT_TRUE(base.is_ok());
  const auto pairs = random_pairs(**base, kLoraAll, 4, 1);
  write_gguf_adapter(temp("a.gguf"), "llama", pairs, 8.0f);
  check_against_merged(**base, temp("a.gguf"), pairs, 8.0 / 4, "gguf adapter");
}

TEST(Lora, APeftFolderOnAHuggingFaceBaseMatchesTheMergedModelWithAndWithoutRsLora) {
  AUTOGLM_REQUIRE_SHARED("models/hf/llama3-tiny/config.json");
  auto base = Model::load(test::shared_path("models/hf/llama3-tiny"));
  ASSERT_TRUE(base.is_ok()) << base.status().message();
  const auto pairs = random_pairs(**base, kLoraAll, 8, 2);
  for (bool rslora : {false, true}) {
    const std::string dir = temp(rslora ? "peft-rs" : "peft");
    write_peft_adapter(dir, **base, pairs, 16.0f, rslora, true);
    check_against_merged(**base, dir, pairs, rslora ? 16.0 / std::sqrt(8.0) : 16.0 / 8, dir);
  }
}

TEST(Lora, AGgufAdapterOnAHuggingFaceBaseAndAPeftFolderOnAGgufBase) {
  AUTOGLM_REQUIRE_SHARED("models/hf/qwen2-tiny/config.json");
  auto hf = Model::load(test::shared_path("models/hf/qwen2-tiny"));
  ASSERT_TRUE(hf.is_ok()) << hf.status().message();
  const auto hf_pairs = random_pairs(**hf, {"attn_q.weight", "attn_v.weight", "ffn_down.weight"}, 4, 3);
  write_gguf_adapter(temp("q.gguf"), (*hf)->spec().arch, hf_pairs, 4.0f);
  check_against_merged(**hf, temp("q.gguf"), hf_pairs, 1.0, "gguf adapter on the qwen2 folder");

  CreateModelOptions o;
  o.type = DType::F32;
  o.arch = "qwen2";
  ASSERT_TRUE(create_random_model(o, temp("qwen2.gguf")).is_ok());
  auto gguf = Model::load(temp("qwen2.gguf"));
  ASSERT_TRUE(gguf.is_ok());
  const auto pairs = random_pairs(**gguf, kLoraAll, 4, 4);
  write_peft_adapter(temp("peft-qwen2"), **gguf, pairs, 4.0f, false, false);  // Qwen2's q/k are not permuted
  check_against_merged(**gguf, temp("peft-qwen2"), pairs, 1.0, "peft folder on a qwen2 GGUF");
}

TEST(Lora, TheBareBaseInTheSameBatchIsUnchangedBitForBit) {
  CreateModelOptions o;
  o.type = DType::F32;
  ASSERT_TRUE(create_random_model(o, temp("bit.gguf")).is_ok());
  auto base = Model::load(temp("bit.gguf"));
  ASSERT_TRUE(base.is_ok());
  write_gguf_adapter(temp("x.gguf"), "llama", random_pairs(**base, kLoraAll, 4, 5), 8.0f);
  write_gguf_adapter(temp("y.gguf"), "llama", random_pairs(**base, {"attn_v.weight"}, 2, 6), 2.0f);
  auto x = load_lora(temp("x.gguf"), **base), y = load_lora(temp("y.gguf"), **base, 0.5f);
  ASSERT_TRUE(x.is_ok() && y.is_ok());
  const LoraSet sx = {*x}, sy = {*y}, sxy = {*x, *y};
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3, 4}, {1, 2, 3, 4}, {5, 6, 7}, {1, 2, 3, 4}};
  const auto mixed = batch_logits(**base, prompts, {&sx, nullptr, &sxy, &sy});
  const auto plain = batch_logits(**base, prompts, {nullptr, nullptr, nullptr, nullptr});
  EXPECT_EQ(mixed[1], plain[1]);  // bit for bit
  EXPECT_NE(mixed[0], plain[0]);
  EXPECT_NE(mixed[3], plain[3]);
  // Each adapted sequence gets what it gets alone.
  EXPECT_EQ(mixed[0], batch_logits(**base, {prompts[0]}, {&sx})[0]);
  EXPECT_EQ(mixed[2], batch_logits(**base, {prompts[2]}, {&sxy})[0]);
  EXPECT_EQ(mixed[3], batch_logits(**base, {prompts[3]}, {&sy})[0]);
  // An adapter's id (its prefix-cache salt, also on disk) is its content: the same file and scale
  // give the same id in any process; another scale or file another.
  auto x_again = load_lora(temp("x.gguf"), **base), x_half = load_lora(temp("x.gguf"), **base, 0.5f);
  ASSERT_TRUE(x_again.is_ok() && x_half.is_ok());
  EXPECT_EQ((*x_again)->id, (*x)->id);
  EXPECT_NE((*x_half)->id, (*x)->id);
  EXPECT_NE((*y)->id, (*x)->id);
}

TEST(Lora, BadAdaptersAreErrorsNamingTheTensorOrTheKey) {
  CreateModelOptions o;
  o.type = DType::F32;
  ASSERT_TRUE(create_random_model(o, temp("bad-base.gguf")).is_ok());
  auto base = Model::load(temp("bad-base.gguf"));
  ASSERT_TRUE(base.is_ok());
  auto pairs = random_pairs(**base, {"attn_q.weight"}, 4, 7);
  auto error_of = [&](const std::string& path) {
    auto r = load_lora(path, **base);
    return r.is_ok() ? std::string("loaded") : r.status().message();
  };
  pairs[0].n_in += 1;  // A of the wrong width
  pairs[0].a.resize(size_t(pairs[0].rank * pairs[0].n_in));
  write_gguf_adapter(temp("wide.gguf"), "llama", pairs, 8.0f);
  EXPECT_NE(error_of(temp("wide.gguf")).find("tensor 'blk.0.attn_q.weight.lora_a' is [4, 257], expected [4, 256]"),
            std::string::npos)
      << error_of(temp("wide.gguf"));
  write_gguf_adapter(temp("arch.gguf"), "qwen2", random_pairs(**base, {"attn_q.weight"}, 4, 7), 8.0f);
  EXPECT_NE(error_of(temp("arch.gguf")).find("for architecture 'qwen2'"), std::string::npos);
  EXPECT_NE(error_of("/nonexistent/nope.gguf").find("nope.gguf"), std::string::npos);
  const std::string dir = temp("peft-bad");
  write_peft_adapter(dir, **base, random_pairs(**base, {"attn_q.weight"}, 4, 8), 8.0f, false, true);
  for (const auto& [key, value, says] : std::vector<std::tuple<std::string, json, std::string>>{
           {"fan_in_fan_out", true, "'fan_in_fan_out' is true"},
           {"modules_to_save", json::array({"lm_head"}), "'modules_to_save' is set"},
           {"use_dora", true, "'use_dora' is true"},
           {"r", 0, "'r' must be a positive integer"}}) {
    json c = json::parse(std::ifstream(dir + "/adapter_config.json"));
    const json saved = c;
    c[key] = value;
    std::ofstream(dir + "/adapter_config.json") << c.dump();
    EXPECT_NE(error_of(dir).find(says), std::string::npos) << error_of(dir);
    std::ofstream(dir + "/adapter_config.json") << saved.dump();
  }
  EXPECT_EQ(error_of(dir), "loaded");
}

// export-lora's merge (f32) gives the logits of the adapter applied at run time, and the
// test's own merge in double.
TEST(Lora, TheExportedMergedModelMatchesTheAdapter) {
  CreateModelOptions o;
  o.type = DType::F16;
  ASSERT_TRUE(create_random_model(o, temp("export-base.gguf")).is_ok());
  ModelLoadOptions no_repack;
  no_repack.repack = false;
  auto base = Model::load(temp("export-base.gguf"), no_repack);
  ASSERT_TRUE(base.is_ok());
  const auto pairs = random_pairs(**base, kLoraAll, 4, 9);
  write_gguf_adapter(temp("export.gguf"), "llama", pairs, 8.0f);
  auto adapter = load_lora(temp("export.gguf"), **base);
  ASSERT_TRUE(adapter.is_ok());
  const LoraSet set = {*adapter};
  ASSERT_TRUE(write_merged_model(**base, set, DType::F32, temp("exported.gguf")).is_ok());
  write_merged(temp("reference.gguf"), **base, pairs, 2.0);
  auto exported = Model::load(temp("exported.gguf")), reference = Model::load(temp("reference.gguf"));
  ASSERT_TRUE(exported.is_ok() && reference.is_ok());
  const std::vector<int32_t> prompt = {1, 8, 3, 9, 4};
  const auto got = batch_logits(**exported, {prompt}, {nullptr})[0];
  EXPECT_EQ(got, batch_logits(**reference, {prompt}, {nullptr})[0]);  // both W + BA in double, stored as f32
  expect_close(got, batch_logits(**base, {prompt}, {&set})[0], "export-lora");
  EXPECT_EQ(write_merged_model(**base, set, std::nullopt, temp("same-type.gguf")).is_ok(), true);
  auto same = Model::load(temp("same-type.gguf"));
  ASSERT_TRUE(same.is_ok());
  EXPECT_EQ((*same)->file().find_tensor("blk.0.attn_q.weight")->type, DType::F16);  // the base's own type
}

TEST(Lora, TheCliArgumentTakesAnOptionalScale) {
  EXPECT_EQ(parse_lora_arg("a.gguf")->second, 1.0f);
  EXPECT_EQ(parse_lora_arg("dir/a.gguf:0.5")->first, "dir/a.gguf");
  EXPECT_EQ(parse_lora_arg("dir/a.gguf:0.5")->second, 0.5f);
  EXPECT_FALSE(parse_lora_arg("a.gguf:x").is_ok());
}

}  // namespace
}  // namespace autoglm
