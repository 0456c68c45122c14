// The decoder against an independent, plainly written float64 forward pass; qwen3's
// q/k norm and decoupled head size on a hand-made model; loader errors; create-model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "formats/gguf.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/matmul.h"
#include "kernels/ref/q8_activations.h"
#include "kernels/ref/quants.h"
#include "model/attention.h"
#include "model/create_model.h"
#include "model/model.h"
#include "model/runner.h"
#include "model_test_util.h"
#include "test_util.h"

namespace autoglm {
namespace {

using Mat = std::vector<double>;  // row-major

Mat tensor(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return {};
  std::vector<float> v(static_cast<size_t>(t->n_elements()));
  ref::dequantize_row(t->type, t->data, v.data(), t->n_elements());
  return Mat(v.begin(), v.end());
}

// The input as a weight of type t sees it: integer kernels quantize activations to int8 blocks.
std::vector<double> as_seen_by(DType t, const std::vector<double>& x) {
  if (!cpu::uses_int8_activations(t)) return x;
  std::vector<float> f(x.begin(), x.end()), back(x.size());
  cpu::activations_as_seen(t, f.data(), 1, int64_t(f.size()), back.data());
  return std::vector<double>(back.begin(), back.end());
}

std::vector<double> matvec(const Mat& w, const std::vector<double>& x, size_t rows) {
  const size_t cols = x.size();
  std::vector<double> y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) y[r] += w[r * cols + c] * x[c];
  return y;
}

void rms(std::vector<double>& x, size_t offset, size_t n, const Mat& w, double eps) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[offset + i] * x[offset + i];
  const double s = 1.0 / std::sqrt(ss / double(n) + eps);
  for (size_t i = 0; i < n; ++i) x[offset + i] *= s * w[i];
}

void rope(std::vector<double>& v, size_t offset, const ModelSpec& s, int pos) {
  const size_t half = size_t(s.n_rot / 2);
  for (size_t i = 0; i < half; ++i) {
    double th = pos * s.rope_freq_scale * std::pow(double(s.rope_freq_base), -2.0 * double(i) / double(s.n_rot));
    if (i < s.rope_freq_factors.size()) th /= s.rope_freq_factors[i];
    const bool neox = s.rope_style == cpu::RopeStyle::kNeox;
    const size_t a = offset + (neox ? i : 2 * i), b = offset + (neox ? i + half : 2 * i + 1);
    const double x0 = v[a], x1 = v[b];
    v[a] = x0 * std::cos(th) - x1 * std::sin(th);
    v[b] = x0 * std::sin(th) + x1 * std::cos(th);
  }
}

std::vector<double> matvec(const GgufFile& f, const std::string& name, const std::vector<double>& x, size_t rows) {
  return matvec(tensor(f, name), as_seen_by(f.find_tensor(name)->type, x), rows);
}

// Logits of every position, computed one token at a time in double precision.
std::vector<double> naive_forward(const GgufFile& f, const ModelSpec& s, const std::vector<int32_t>& tokens) {
  const size_t d = size_t(s.n_embd), hd = size_t(s.head_dim), nh = size_t(s.n_head), nkv = size_t(s.n_head_kv);
  const Mat embd = tensor(f, "token_embd.weight");
  std::vector<std::vector<std::vector<double>>> K(size_t(s.n_layer)), V(size_t(s.n_layer));
  std::vector<double> all;
  for (size_t p = 0; p < tokens.size(); ++p) {
    std::vector<double> x(embd.begin() + long(size_t(tokens[p]) * d), embd.begin() + long((size_t(tokens[p]) + 1) * d));
    for (int64_t il = 0; il < s.n_layer; ++il) {
      const std::string b = "blk." + std::to_string(il) + ".";
      std::vector<double> h = x;
      rms(h, 0, d, tensor(f, b + "attn_norm.weight"), s.rms_eps);
      auto q = matvec(f, b + "attn_q.weight", h, nh * hd);
      auto k = matvec(f, b + "attn_k.weight", h, nkv * hd);
      auto v = matvec(f, b + "attn_v.weight", h, nkv * hd);
      if (s.qkv_bias) {
        const Mat bq = tensor(f, b + "attn_q.bias"), bk = tensor(f, b + "attn_k.bias"),
                  bv = tensor(f, b + "attn_v.bias");
        for (size_t i = 0; i < q.size(); ++i) q[i] += bq[i];
        for (size_t i = 0; i < k.size(); ++i) k[i] += bk[i], v[i] += bv[i];
      }
      for (size_t hh = 0; hh < nh; ++hh) {
        if (s.qk_norm) rms(q, hh * hd, hd, tensor(f, b + "attn_q_norm.weight"), s.rms_eps);
        rope(q, hh * hd, s, int(p));
      }
      for (size_t hh = 0; hh < nkv; ++hh) {
        if (s.qk_norm) rms(k, hh * hd, hd, tensor(f, b + "attn_k_norm.weight"), s.rms_eps);
        rope(k, hh * hd, s, int(p));
      }
      K[size_t(il)].push_back(k);
      V[size_t(il)].push_back(v);
      std::vector<double> att(nh * hd, 0.0);
      for (size_t hh = 0; hh < nh; ++hh) {
        const size_t g = hh / (nh / nkv);
        std::vector<double> sc(p + 1);
        double mx = -1e300, sum = 0;
        for (size_t j = 0; j <= p; ++j) {
          double dot = 0;
          for (size_t e = 0; e < hd; ++e) dot += q[hh * hd + e] * K[size_t(il)][j][g * hd + e];
          sc[j] = dot / std::sqrt(double(hd));
          mx = std::max(mx, sc[j]);
        }
        for (auto& v2 : sc) sum += v2 = std::exp(v2 - mx);
        for (size_t j = 0; j <= p; ++j)
          for (size_t e = 0; e < hd; ++e) att[hh * hd + e] += sc[j] / sum * V[size_t(il)][j][g * hd + e];
      }
      const auto o = matvec(f, b + "attn_output.weight", att, d);
      for (size_t i = 0; i < d; ++i) x[i] += o[i];
      h = x;
      rms(h, 0, d, tensor(f, b + "ffn_norm.weight"), s.rms_eps);
      auto gate = matvec(f, b + "ffn_gate.weight", h, size_t(s.n_ff));
      const auto up = matvec(f, b + "ffn_up.weight", h, size_t(s.n_ff));
      for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
      const auto down = matvec(f, b + "ffn_down.weight", gate, d);
      for (size_t i = 0; i < d; ++i) x[i] += down[i];
    }
    rms(x, 0, d, tensor(f, "output_norm.weight"), s.rms_eps);
    const auto logits =
        matvec(f, f.find_tensor("output.weight") ? "output.weight" : "token_embd.weight", x, size_t(s.n_vocab));
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

std::vector<float> engine_forward(const Model& m, const std::vector<int32_t>& tokens) {
  return test::forward_all_positions(m, tokens, DType::F32);  // the oracle keeps f32 keys and values
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

// Writes a float32 tensor whose values follow a fixed pattern.
void add_pattern(GgufWriter& w, const std::string& name, std::vector<int64_t> dims, float scale, float phase) {
  int64_t n = 1;
  for (auto d : dims) n *= d;
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) {
    const float v = scale * std::sin(0.7f * float(i) + phase);
    std::memcpy(bytes.data() + 4 * i, &v, 4);
  }
  ASSERT_TRUE(w.add_tensor(name, DType::F32, std::move(dims), std::move(bytes)).is_ok());
}

// A qwen3-style model with head size 6 while n_embd / n_head = 4, and q/k norms whose
// weights are far from 1, so that dropping either would show.
std::string write_qwen3_model() {
  GgufWriter w;
  const int64_t d = 8, nh = 2, nkv = 1, hd = 6, ff = 12, vocab = 16;
  w.set("general.architecture", GgufValue::string("qwen3"));
  w.set("qwen3.embedding_length", GgufValue::u32(d));
  w.set("qwen3.block_count", GgufValue::u32(1));
  w.set("qwen3.feed_forward_length", GgufValue::u32(ff));
  w.set("qwen3.attention.head_count", GgufValue::u32(nh));
  w.set("qwen3.attention.head_count_kv", GgufValue::u32(nkv));
  w.set("qwen3.attention.key_length", GgufValue::u32(hd));
  w.set("qwen3.attention.value_length", GgufValue::u32(hd));
  w.set("qwen3.rope.freq_base", GgufValue::f32(100.0f));
  w.set("qwen3.attention.layer_norm_rms_epsilon", GgufValue::f32(1e-6f));
  add_pattern(w, "token_embd.weight", {d, vocab}, 1.0f, 0.1f);
  add_pattern(w, "output_norm.weight", {d}, 0.5f, 1.0f);
  add_pattern(w, "output.weight", {d, vocab}, 0.8f, 0.2f);
  add_pattern(w, "blk.0.attn_norm.weight", {d}, 1.0f, 0.3f);
  add_pattern(w, "blk.0.attn_q.weight", {d, nh * hd}, 0.9f, 0.4f);
  add_pattern(w, "blk.0.attn_k.weight", {d, nkv * hd}, 0.9f, 0.5f);
  add_pattern(w, "blk.0.attn_v.weight", {d, nkv * hd}, 0.9f, 0.6f);
  add_pattern(w, "blk.0.attn_q_norm.weight", {hd}, 2.0f, 0.7f);
  add_pattern(w, "blk.0.attn_k_norm.weight", {hd}, 2.0f, 0.8f);
  add_pattern(w, "blk.0.attn_output.weight", {nh * hd, d}, 0.7f, 0.9f);
  add_pattern(w, "blk.0.ffn_norm.weight", {d}, 1.0f, 1.1f);
  add_pattern(w, "blk.0.ffn_gate.weight", {d, ff}, 0.6f, 1.2f);
  add_pattern(w, "blk.0.ffn_up.weight", {d, ff}, 0.6f, 1.3f);
  add_pattern(w, "blk.0.ffn_down.weight", {ff, d}, 0.6f, 1.4f);
  const std::string path = test::temp_path("qwen3.gguf");
  EXPECT_TRUE(w.write(path).is_ok());
  return path;
}

TEST(Qwen3, QkNormAndDecoupledHeadSizeMatchPlainForward) {
  const std::string path = write_qwen3_model();
  auto m = Model::load(path);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const ModelSpec& s = (*m)->spec();
  EXPECT_TRUE(s.qk_norm);
  EXPECT_EQ(s.head_dim, 6);
  EXPECT_EQ(s.q_dim(), 12);  // != n_embd
  EXPECT_EQ(s.rope_style, cpu::RopeStyle::kNeox);
  const std::vector<int32_t> tokens = {3, 7, 1, 12, 5};
  const auto mine = engine_forward(**m, tokens);
  const auto want = naive_forward((*m)->file(), s, tokens);
  EXPECT_LT(max_abs_diff(mine, want), 1e-4);
  // The check can fail: without the q/k norm weights the logits move far away.
  ModelSpec no_norm = s;
  no_norm.qk_norm = false;
  EXPECT_GT(max_abs_diff(mine, naive_forward((*m)->file(), no_norm, tokens)), 1e-2);
  std::remove(path.c_str());
}

// std::string, not const char*: gtest prints a tuple's char pointers as addresses.
class CreatedModel : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(CreatedModel, LoadsAndMatchesPlainForward) {
  const auto [arch, type] = GetParam();
  CreateModelOptions o;
  o.arch = arch;
  o.type = *dtype_from_name(type);
  o.seed = 5;
  const std::string path = test::temp_path(std::string(arch) + type + ".gguf");
  ASSERT_TRUE(create_random_model(o, path).is_ok());
  auto m = Model::load(path);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)->spec().arch, arch);
  EXPECT_EQ((*m)->spec().n_vocab, 2048);
  const std::vector<int32_t> tokens = {1, 300, 301, 700, 1500, 9};
  const auto mine = engine_forward(**m, tokens);
  const auto want = naive_forward((*m)->file(), (*m)->spec(), tokens);
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  // Agreement is ~1e-6 of the scale, but with int8 activations a value that float and double
  // round to different codes moves later logits by ~1e-2; wrong kernels move them by ~scale.
  const double tolerance = cpu::uses_int8_activations(*dtype_from_name(type)) ? 0.03 * scale : 2e-3;
  EXPECT_LT(max_abs_diff(mine, want), tolerance) << "logit scale " << scale;
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(ArchAndType, CreatedModel,
                         ::testing::Combine(::testing::Values("llama", "qwen2", "qwen3"),
                                            ::testing::Values("f32", "q8_0", "q5_1", "q4_k")),
                         [](const auto& info) {
                           return test::param_name(std::get<0>(info.param) + "_" + std::get<1>(info.param));
                         });

TEST(CreateModel, SameSeedSameBytes) {
  CreateModelOptions o;
  o.type = DType::Q4_0;
  const std::string a = test::temp_path("a.gguf"), b = test::temp_path("b.gguf");
  ASSERT_TRUE(create_random_model(o, a).is_ok());
  ASSERT_TRUE(create_random_model(o, b).is_ok());
  EXPECT_EQ(test::read_file(a), test::read_file(b));
  o.seed = 2;
  ASSERT_TRUE(create_random_model(o, b).is_ok());
  EXPECT_NE(test::read_file(a), test::read_file(b));
  std::remove(a.c_str());
  std::remove(b.c_str());
}

TEST(CreateModel, RejectsBadOptions) {
  CreateModelOptions o;
  o.preset = "7b";
  EXPECT_NE(create_random_model(o, "/tmp/x.gguf").message().find("--preset '7b'"), std::string::npos);
  o.preset = "tiny";
  o.arch = "gpt5";
  EXPECT_NE(create_random_model(o, "/tmp/x.gguf").message().find("--arch 'gpt5'"), std::string::npos);
}

// Corrupting any byte of the tensor table and hyper-parameters gives an error or a
// model that validated every shape; never a crash.
TEST(ModelLoader, CorruptTensorTableNeverCrashes) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  const std::string s = test::read_file(test::shared_path("models/stories260K.gguf"));
  const std::vector<uint8_t> good(s.begin(), s.end());
  const size_t table_start = 12000;  // the tensor table lies in [~12.3k, 14176)
  int loaded = 0, rejected = 0;
  for (size_t at = table_start; at < 14176; ++at) {
    auto b = good;
    b[at] ^= 0x41;
    auto f = GgufFile::parse(b.data(), b.size(), "corrupt.gguf");
    if (!f) {
      ++rejected;
      continue;
    }
    auto m = Model::from_gguf(std::move(f).value());
    if (m) {
      ++loaded;
      const auto logits = engine_forward(**m, {1, 2});
      EXPECT_EQ(logits.size(), size_t(2 * (*m)->spec().n_vocab));
    } else {
      ++rejected;
      EXPECT_NE(m.status().message().find("corrupt.gguf"), std::string::npos) << m.status().message();
    }
  }
  EXPECT_GT(rejected, 1000);
}

TEST(ModelLoader, NamesMissingTensorAndUnsupportedArch) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("gpt-j"));
  const std::string path = test::temp_path("arch.gguf");
  ASSERT_TRUE(w.write(path).is_ok());
  auto m = Model::load(path);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("architecture 'gpt-j' is not supported"), std::string::npos);
  std::remove(path.c_str());
}

TEST(ModelLoader, ArchitectureOverrideSwitchesTheDecoder) {
  AUTOGLM_REQUIRE_SHARED("models/random/rand-llama-gqa.gguf");
  // rand-llama-gqa run as qwen2 rotates NeoX pairs and needs q/k/v biases it lacks: a clear error.
  auto m = Model::load(test::shared_path("models/random/rand-llama-gqa.gguf"), "qwen2");
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("attn_q.bias"), std::string::npos) << m.status().message();
  auto mistral = Model::load(test::shared_path("models/random/rand-llama-gqa.gguf"), "mistral");
  ASSERT_TRUE(mistral.is_ok()) << mistral.status().message();
  EXPECT_EQ((*mistral)->spec().arch, "mistral");
  EXPECT_EQ((*mistral)->spec().n_layer, 3);
  EXPECT_FALSE(Model::load(test::shared_path("models/random/rand-llama-gqa.gguf"), "gpt5").is_ok());
}

TEST(Runner, RaggedBatchEqualsSeparateRuns) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  auto m = Model::load(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m.is_ok());
  ThreadPool pool(2);
  ModelRunner runner(**m, pool);
  const std::vector<int32_t> a = {1, 403, 407, 261}, b = {1, 50, 60};
  // Alone.
  std::vector<float> la, lb;
  ContiguousKvCache ca((*m)->spec(), 32), cb((*m)->spec(), 32);
  Batch ba, bb;
  ba.caches = {&ca};
  ba.add_sequence_tokens(0, a.data(), 4, 0, true);
  bb.caches = {&cb};
  bb.add_sequence_tokens(0, b.data(), 3, 0, true);
  ASSERT_TRUE(runner.forward(ba, la).is_ok());
  ASSERT_TRUE(runner.forward(bb, lb).is_ok());
  // Together in one ragged batch.
  ContiguousKvCache c1((*m)->spec(), 32), c2((*m)->spec(), 32);
  Batch both;
  both.caches = {&c1, &c2};
  both.add_sequence_tokens(0, a.data(), 4, 0, true);
  both.add_sequence_tokens(1, b.data(), 3, 0, true);
  std::vector<float> l;
  ASSERT_TRUE(runner.forward(both, l).is_ok());
  const size_t n = size_t((*m)->spec().n_vocab);
  ASSERT_EQ(l.size(), 2 * n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_NEAR(l[i], la[i], 1e-5);
    EXPECT_NEAR(l[n + i], lb[i], 1e-5);
  }
}

// Prefill's per-row ops (norms, biases, rope, the cache's writes, the gated activation, the routing)
// run over the pool's threads once a batch is large enough: every logit of a long prompt is the same,
// bit for bit, on one thread and on two. Models with q/k norms (qwen3), biases (qwen2) and experts.
TEST(Runner, PrefillOnTwoThreadsIsBitForBitPrefillOnOne) {
  for (const char* name : {"rand-llama-gqa", "rand-qwen3", "rand-qwen2", "rand-glm4moe"}) {
    SCOPED_TRACE(name);
    const std::string file = std::string("models/random/") + name + ".gguf";
    AUTOGLM_REQUIRE_SHARED(file);
    auto m = Model::load(test::shared_path(file));
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    const ModelSpec& spec = (*m)->spec();
    // The models' narrowest rows are 64 floats (a KV head of 32 and its bias): 512 of them reach the
    // threshold, so every per-row op of these models runs split over the two threads.
    const int64_t T = 512;
    ASSERT_GE(spec.n_ctx_train, T);
    std::vector<int32_t> prompt(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) prompt[size_t(t)] = int32_t(1 + (t * 7919) % (spec.n_vocab - 1));
    auto logits_with = [&](int threads) {
      ThreadPool pool(threads);
      ModelRunner runner(**m, pool);
      ContiguousKvCache cache(spec, T);
      Batch b;
      b.caches = {&cache};
      b.add_sequence_tokens(0, prompt.data(), T, 0, false, true);
      std::vector<float> logits;
      const Status st = runner.forward(b, logits);
      EXPECT_TRUE(st.is_ok()) << st.message();
      return logits;
    };
    const std::vector<float> one = logits_with(1), two = logits_with(2);
    ASSERT_EQ(one.size(), size_t(T * spec.n_vocab));
    ASSERT_EQ(two.size(), one.size());
    size_t differ = 0;
    for (size_t i = 0; i < one.size(); ++i) differ += std::memcmp(&one[i], &two[i], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0u) << "of " << one.size() << " logits";
  }
}

TEST(Runner, RejectsBadBatches) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  auto m = Model::load(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m.is_ok());
  ThreadPool pool(1);
  ModelRunner runner(**m, pool);
  ContiguousKvCache cache((*m)->spec(), 4);
  std::vector<float> logits;
  Batch bad_token;
  bad_token.caches = {&cache};
  const int32_t big = 100000;
  bad_token.add_sequence_tokens(0, &big, 1, 0, true);
  EXPECT_NE(runner.forward(bad_token, logits).message().find("outside the vocabulary"), std::string::npos);
  Batch too_long;
  too_long.caches = {&cache};
  const int32_t one = 1;
  too_long.add_sequence_tokens(0, &one, 1, 4, true);
  EXPECT_NE(runner.forward(too_long, logits).message().find("outside the context"), std::string::npos);
}

// Two tokens that would write one KV row (one cache, one position) are refused before anything
// runs; the same positions in two caches, or one cache's runs out of order, are not.
TEST(Runner, RejectsTwoTokensAtOnePositionOfOneCache) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  auto m = Model::load(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m.is_ok());
  ThreadPool pool(1);
  ModelRunner runner(**m, pool);
  ContiguousKvCache cache((*m)->spec(), 8), other((*m)->spec(), 8);
  const int32_t ids[3] = {1, 2, 3};
  std::vector<float> logits;
  const auto run = [&](std::vector<KvCache*> caches, std::vector<std::pair<int32_t, int32_t>> runs) {
    Batch b;  // runs: (sequence, first position) of three tokens each
    b.caches = std::move(caches);
    for (const auto& [seq, start] : runs) b.add_sequence_tokens(seq, ids, 3, start, true);
    return runner.forward(b, logits);
  };
  const Status overlap = run({&cache}, {{0, 0}, {0, 2}});
  EXPECT_NE(overlap.message().find("position 2 of sequence 0 is written twice"), std::string::npos)
      << overlap.message();
  const Status shared = run({&cache, &cache}, {{0, 4}, {1, 2}});
  EXPECT_NE(shared.message().find("is written twice"), std::string::npos) << shared.message();
  EXPECT_TRUE(run({&cache, &other}, {{0, 0}, {1, 0}}).is_ok());
  EXPECT_TRUE(run({&cache}, {{0, 3}, {0, 0}}).is_ok());
  // The accepted pass's rows are readable; after a refused one there are none to read.
  std::vector<float> hidden;
  ASSERT_TRUE(runner.last_hidden(hidden).is_ok());
  EXPECT_EQ(hidden.size(), size_t(6 * (*m)->spec().n_embd));
  EXPECT_FALSE(run({&cache}, {{0, 0}, {0, 2}}).is_ok());
  ASSERT_TRUE(runner.last_hidden(hidden).is_ok());
  EXPECT_TRUE(hidden.empty()) << hidden.size() << " floats of an earlier pass";
}

}  // namespace
}  // namespace autoglm

namespace autoglm {
namespace {

// A cache whose spans hold 5 positions each, in scattered order: attention must walk spans.
class ScatteredKvCache final : public KvCache {
 public:
  ScatteredKvCache(const KvFormat& f, int64_t n_spans) : KvCache(f), n_spans_(n_spans) {
    keys_.resize(size_t(n_spans * kSpan * f.k_row_bytes));
    values_.resize(size_t(n_spans * kSpan * f.v_row_bytes));
  }
  int64_t capacity() const override { return n_spans_ * kSpan; }
  int64_t span() const override { return kSpan; }
  uint8_t* key_span(int64_t, int64_t first) override { return keys_.data() + slot(first) * format().k_row_bytes; }
  uint8_t* value_span(int64_t, int64_t first) override { return values_.data() + slot(first) * format().v_row_bytes; }

 private:
  static constexpr int64_t kSpan = 5;
  int64_t slot(int64_t first) const { return (n_spans_ - 1 - first / kSpan) * kSpan; }  // reversed order
  int64_t n_spans_;
  std::vector<uint8_t> keys_, values_;
};

// One layer with 4 query heads over n_head_kv KV heads of head_dim values.
ModelSpec attention_spec(int64_t n_head_kv, int64_t head_dim = 32) {
  ModelSpec spec;
  spec.n_layer = 1;
  spec.n_head = 4;
  spec.n_head_kv = n_head_kv;
  spec.head_dim = spec.head_dim_v = head_dim;
  return spec;
}

// One query per KV head against n_pos positions, every KV type and ISA that runs, against a plain
// two-pass softmax in double over the stored values. Head sizes 32 and 64 (whole vectors of 8 and
// 16 lanes and the 64-wide output blocks), 40 and 72 (a last 8 past the 16-lane vectors).
void expect_attention_matches_plain_softmax(int64_t hd) {
  const ModelSpec spec = attention_spec(2, hd);
  const int64_t n_pos = 70;  // two full chunks of 32 and a partial one
  const AttentionShape shape{2, hd, hd, 1.0f / std::sqrt(float(hd))};
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> k(size_t(n_pos * spec.kv_dim())), v(k.size()), q(size_t(2 * hd));
  for (auto* vec : {&k, &v, &q})
    for (auto& x : *vec) x = dist(rng);
  const std::string in_use = cpu::kernel_isa();
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    if (type == DType::Q8_0 && hd % 32 != 0) continue;  // Q8_0 rows are whole blocks of 32
    const KvFormat f = *kv_format(spec, type);
    ContiguousKvCache contiguous(spec, n_pos, type);
    ScatteredKvCache scattered(f, (n_pos + 4) / 5);
    std::vector<float> seen_k(k.size()), seen_v(v.size());  // the values as stored
    for (int64_t p = 0; p < n_pos; ++p)
      for (KvCache* c : {static_cast<KvCache*>(&contiguous), static_cast<KvCache*>(&scattered)}) {
        cpu::encode_kv_row(type, &k[size_t(p * spec.kv_dim())], c->key_row(0, p), spec.kv_dim());
        cpu::encode_kv_row(type, &v[size_t(p * spec.kv_dim())], c->value_row(0, p), spec.kv_dim());
        ref::dequantize_row(type, c->key_row(0, p), &seen_k[size_t(p * spec.kv_dim())], spec.kv_dim());
        ref::dequantize_row(type, c->value_row(0, p), &seen_v[size_t(p * spec.kv_dim())], spec.kv_dim());
      }
    for (const char* isa : {"generic", "avx2", "avxvnni", "avx512vnni"}) {
      if (!cpu::select_kernel_isa(isa)) continue;
      const std::string what = std::string(dtype_name(type)) + " " + isa + " head size " + std::to_string(hd);
      std::vector<float> scratch(size_t(attention_scratch_floats(shape))), out_a(size_t(2 * hd)), out_b(out_a.size());
      const auto ops = cpu::kv_row_ops(type);
      const int64_t kv_head = 1;
      attend_tile(contiguous, 0, kv_head, {q.data(), 2 * hd, out_a.data(), 2 * hd, 1, n_pos}, shape, ops,
                  scratch.data());
      attend_tile(scattered, 0, kv_head, {q.data(), 2 * hd, out_b.data(), 2 * hd, 1, n_pos}, shape, ops,
                  scratch.data());
      EXPECT_EQ(out_a, out_b) << what << ": spans changed the result";
      for (int64_t h = 0; h < 2; ++h) {
        std::vector<double> s(static_cast<size_t>(n_pos));
        double mx = -1e300, sum = 0;
        for (int64_t p = 0; p < n_pos; ++p) {
          double d = 0;
          for (int64_t i = 0; i < hd; ++i)
            d += double(q[size_t(h * hd + i)]) * seen_k[size_t(p * spec.kv_dim() + kv_head * hd + i)];
          s[size_t(p)] = d * shape.scale;
          mx = std::max(mx, s[size_t(p)]);
        }
        for (auto& x : s) sum += (x = std::exp(x - mx));
        for (int64_t i = 0; i < hd; ++i) {
          double want = 0;
          for (int64_t p = 0; p < n_pos; ++p)
            want += s[size_t(p)] / sum * seen_v[size_t(p * spec.kv_dim() + kv_head * hd + i)];
          EXPECT_NEAR(out_a[size_t(h * hd + i)], want, 1e-5) << what << " head " << h << " dim " << i;
        }
      }
    }
  }
  cpu::select_kernel_isa(in_use.c_str());
}

TEST(Attention, FusedOnlineSoftmaxMatchesPlainSoftmax) {
  for (int64_t hd : {32, 40, 64, 72}) expect_attention_matches_plain_softmax(hd);
}

// A prefill tile shares K/V loads across tokens; each token's result is what it gets alone.
TEST(Attention, TileOfTokensEqualsEachTokenAlone) {
  const ModelSpec spec = attention_spec(1);
  const AttentionShape shape{4, 32, 32, 1.0f / std::sqrt(32.0f)};
  // Token i sees first + i positions; token 0 ends exactly at a chunk edge (32), the others run past it.
  const int64_t n_pos = 39, n_tile = 8, first = n_pos - n_tile + 1;
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> kv(size_t(n_pos * 32)), q(size_t(n_tile * 4 * 32));
  for (auto* vec : {&kv, &q})
    for (auto& x : *vec) x = dist(rng);
  ContiguousKvCache cache(spec, n_pos, DType::F16);
  for (int64_t p = 0; p < n_pos; ++p) {
    cpu::encode_kv_row(DType::F16, &kv[size_t(p * 32)], cache.key_row(0, p), 32);
    cpu::encode_kv_row(DType::F16, &kv[size_t((n_pos - 1 - p) * 32)], cache.value_row(0, p), 32);
  }
  // Every ISA that runs: the 32 queries of the tile go in register blocks of 4 (AVX-512) or 3 + a
  // pair (AVX2), a token alone in 4 or 3 + 1.
  const std::string in_use = cpu::kernel_isa();
  for (const char* isa : {"generic", "avx2", "avxvnni", "avx512vnni"}) {
    if (!cpu::select_kernel_isa(isa)) continue;
    const auto ops = cpu::kv_row_ops(DType::F16);
    std::vector<float> scratch(size_t(attention_scratch_floats(shape)));
    std::vector<float> tiled(q.size()), alone(q.size());
    attend_tile(cache, 0, 0, {q.data(), 128, tiled.data(), 128, n_tile, first}, shape, ops, scratch.data());
    for (int64_t i = 0; i < n_tile; ++i)
      attend_tile(cache, 0, 0, {&q[size_t(i * 128)], 128, &alone[size_t(i * 128)], 128, 1, first + i}, shape, ops,
                  scratch.data());
    EXPECT_EQ(tiled, alone) << isa;
    EXPECT_NE(std::vector<float>(tiled.begin(), tiled.begin() + 128),
              std::vector<float>(tiled.end() - 128, tiled.end()))
        << isa;
  }
  cpu::select_kernel_isa(in_use.c_str());
}

TEST(Attention, Q8KvNeedsHeadSizesOf32) {
  const ModelSpec spec = attention_spec(2, 6);
  const auto f = kv_format(spec, DType::Q8_0);
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("multiples of 32"), std::string::npos);
  EXPECT_TRUE(kv_format(spec, DType::F16).is_ok());
  EXPECT_FALSE(kv_type_from_name("q4_0").is_ok());
}

}  // namespace
}  // namespace autoglm

// create-model's mixture-of-experts presets and the parameter counts of `info`.
#include "model/param_count.h"

namespace autoglm {
namespace {

using Dims = std::vector<int64_t>;

// The tiny mixture-of-experts preset: n_embd 256, 4 heads of 64 (2 KV heads), 8 experts of
// 256 with 2 used, dense FFN 512, 4 blocks; deepseek2's MLA: q_lora 256, kv_lora 256, rope 32,
// nope 64, v_head 64.
constexpr int64_t kEmbd = 256, kHeads = 4, kExperts = 8, kFfExp = 256;

struct MoeFile {
  std::string path;
  std::unique_ptr<GgufFile> file;
  ~MoeFile() { std::remove(path.c_str()); }
};

std::unique_ptr<MoeFile> create_tiny(const std::string& arch, DType type, int64_t n_layer = 0) {
  CreateModelOptions o;
  o.arch = arch;
  o.type = type;
  o.n_layer = n_layer;
  auto m = std::make_unique<MoeFile>();
  m->path = test::temp_path("moe-" + arch + ".gguf");
  const Status st = create_random_model(o, m->path);
  EXPECT_TRUE(st.is_ok()) << st.message();
  auto f = GgufFile::open(m->path);
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  if (f.is_ok()) m->file = std::move(*f);
  return m;
}

// "" when `name` is there with these dims, else what is wrong.
std::string tensor_problem(const GgufFile& f, const std::string& name, const Dims& dims) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (!t) return name + " is missing";
  if (t->dims != dims) return name + " has other dims";
  return "";
}

int64_t key(const GgufFile& f, const std::string& k) {
  return f.get_int(k).value_or(-1);
}

class MoePreset : public ::testing::TestWithParam<const char*> {};

TEST_P(MoePreset, HasLlamaCppKeysAndExpertTensors) {
  const std::string arch = GetParam(), a = arch + ".";
  auto m = create_tiny(arch, DType::Q8_0);
  ASSERT_TRUE(m->file);
  const GgufFile& f = *m->file;
  EXPECT_EQ(f.get_string("general.architecture"), arch);
  EXPECT_EQ(key(f, a + "block_count"), 4);
  EXPECT_EQ(key(f, a + "embedding_length"), kEmbd);
  EXPECT_EQ(key(f, a + "attention.head_count"), kHeads);
  EXPECT_EQ(key(f, a + "expert_count"), kExperts);
  EXPECT_EQ(key(f, a + "expert_used_count"), 2);
  EXPECT_EQ(key(f, a + "expert_feed_forward_length"), kFfExp);
  EXPECT_EQ(f.find(a + "nextn_predict_layers"), nullptr);
  const bool dense_lead = arch == "glm4moe" || arch == "deepseek2";
  EXPECT_EQ(key(f, a + "leading_dense_block_count"), dense_lead ? 1 : -1);
  const std::string b = "blk.3.";
  EXPECT_EQ(tensor_problem(f, b + "ffn_gate_inp.weight", {kEmbd, kExperts}), "");
  EXPECT_EQ(f.find_tensor(b + "ffn_gate_inp.weight")->type, DType::F32);
  EXPECT_EQ(tensor_problem(f, b + "ffn_gate_exps.weight", {kEmbd, kFfExp, kExperts}), "");
  EXPECT_EQ(tensor_problem(f, b + "ffn_up_exps.weight", {kEmbd, kFfExp, kExperts}), "");
  EXPECT_EQ(tensor_problem(f, b + "ffn_down_exps.weight", {kFfExp, kEmbd, kExperts}), "");
  if (arch != "gpt-oss") {
    EXPECT_EQ(f.find_tensor(b + "ffn_down_exps.weight")->type, DType::Q8_0);
  }
  EXPECT_EQ(f.find_tensor("blk.4.attn_norm.weight"), nullptr);
  if (dense_lead) {
    EXPECT_EQ(tensor_problem(f, "blk.0.ffn_gate.weight", {kEmbd, 512}), "");
    EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_inp.weight"), nullptr);
    EXPECT_EQ(tensor_problem(f, b + "exp_probs_b.bias", {kExperts}), "");
    EXPECT_EQ(tensor_problem(f, b + "ffn_gate_shexp.weight", {kEmbd, kFfExp}), "");
    EXPECT_EQ(tensor_problem(f, b + "ffn_down_shexp.weight", {kFfExp, kEmbd}), "");
    EXPECT_EQ(key(f, a + "expert_shared_count"), 1);
    EXPECT_EQ(key(f, a + "expert_gating_func"), 2);
    EXPECT_TRUE(f.get_bool(a + "expert_weights_norm").value_or(false));
    EXPECT_GT(f.get_float(a + "expert_weights_scale").value_or(0), 1.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Arch, MoePreset, ::testing::Values("qwen3moe", "glm4moe", "gpt-oss", "deepseek2"),
                         [](const auto& info) { return test::param_name(info.param); });

// 30b-a3b is Qwen3-30B-A3B's shape (its config.json: hidden 2048, 48 layers, 32 heads, 4 KV
// heads of 128, 128 experts, 8 used, expert FFN 768, vocabulary 151936); --n-layer scales the
// depth only. The file carries the preset's shape (checked on tiny, the same code path).
TEST(CreateModel, MoePresetsShapes) {
  CreateModelOptions o;
  o.arch = "qwen3moe";
  o.preset = "30b-a3b";
  auto big = create_model_preset(o);
  ASSERT_TRUE(big.is_ok()) << big.status().message();
  EXPECT_EQ(big->n_embd, 2048);
  EXPECT_EQ(big->n_layer, 48);
  EXPECT_EQ(big->n_head, 32);
  EXPECT_EQ(big->n_head_kv, 4);
  EXPECT_EQ(big->head_dim, 128);
  EXPECT_EQ(big->n_expert, 128);
  EXPECT_EQ(big->n_expert_used, 8);
  EXPECT_EQ(big->n_ff_exp, 768);
  EXPECT_EQ(big->n_vocab, 151936);
  o.n_layer = 12;
  auto scaled = create_model_preset(o);
  ASSERT_TRUE(scaled.is_ok()) << scaled.status().message();
  EXPECT_EQ(scaled->n_layer, 12);
  EXPECT_EQ(scaled->n_embd, 2048);
  EXPECT_EQ(scaled->n_expert, 128);
  o.arch = "llama";
  auto dense = create_model_preset(o);
  ASSERT_FALSE(dense.is_ok());
  EXPECT_NE(dense.status().message().find("--preset '30b-a3b' is not one of tiny, 150m, 1b"), std::string::npos);

  for (const char* arch : {"qwen3moe", "glm4moe", "gpt-oss", "deepseek2"}) {
    CreateModelOptions t;
    t.arch = arch;
    t.preset = "tiny";
    auto shape = create_model_preset(t);
    ASSERT_TRUE(shape.is_ok()) << shape.status().message();
    auto m = create_tiny(arch, DType::Q8_0);
    ASSERT_TRUE(m->file);
    const std::string a = std::string(arch) + ".";
    EXPECT_EQ(key(*m->file, a + "block_count"), shape->n_layer) << arch;
    EXPECT_EQ(key(*m->file, a + "embedding_length"), shape->n_embd) << arch;
    EXPECT_EQ(key(*m->file, a + "expert_count"), shape->n_expert) << arch;
    EXPECT_EQ(key(*m->file, a + "expert_used_count"), shape->n_expert_used) << arch;
    EXPECT_EQ(key(*m->file, a + "expert_feed_forward_length"), shape->n_ff_exp) << arch;
  }
}

TEST(CreateModel, Qwen3MoeAndGlm4MoeAttention) {
  auto q = create_tiny("qwen3moe", DType::F16);
  ASSERT_TRUE(q->file);
  EXPECT_EQ(tensor_problem(*q->file, "blk.0.attn_q.weight", {kEmbd, kHeads * 64}), "");
  EXPECT_EQ(tensor_problem(*q->file, "blk.0.attn_q_norm.weight", {64}), "");
  EXPECT_EQ(tensor_problem(*q->file, "blk.0.ffn_norm.weight", {kEmbd}), "");
  EXPECT_EQ(key(*q->file, "qwen3moe.attention.key_length"), 64);
  auto g = create_tiny("glm4moe", DType::F16);
  ASSERT_TRUE(g->file);
  EXPECT_EQ(key(*g->file, "glm4moe.rope.dimension_count"), 32);  // partial rotary: half a head
  EXPECT_EQ(tensor_problem(*g->file, "blk.1.attn_q.bias", {kHeads * 64}), "");
  EXPECT_EQ(tensor_problem(*g->file, "blk.1.attn_k.bias", {2 * 64}), "");
  EXPECT_EQ(tensor_problem(*g->file, "blk.1.post_attention_norm.weight", {kEmbd}), "");
  EXPECT_EQ(g->file->find_tensor("blk.1.ffn_norm.weight"), nullptr);
}

TEST(CreateModel, GptOssSinksBiasesAndYarn) {
  auto m = create_tiny("gpt-oss", DType::Q8_0);
  ASSERT_TRUE(m->file);
  const GgufFile& f = *m->file;
  EXPECT_EQ(tensor_problem(f, "blk.1.attn_sinks.weight", {kHeads}), "");
  EXPECT_EQ(tensor_problem(f, "blk.1.attn_output.bias", {kEmbd}), "");
  EXPECT_EQ(tensor_problem(f, "blk.1.attn_v.bias", {2 * 64}), "");
  EXPECT_EQ(tensor_problem(f, "blk.1.post_attention_norm.weight", {kEmbd}), "");
  EXPECT_EQ(tensor_problem(f, "blk.1.ffn_gate_inp.bias", {kExperts}), "");
  EXPECT_EQ(tensor_problem(f, "blk.1.ffn_gate_exps.bias", {kFfExp, kExperts}), "");
  EXPECT_EQ(tensor_problem(f, "blk.1.ffn_up_exps.bias", {kFfExp, kExperts}), "");
  EXPECT_EQ(tensor_problem(f, "blk.1.ffn_down_exps.bias", {kEmbd, kExperts}), "");
  EXPECT_GT(key(f, "gpt-oss.attention.sliding_window"), 0);
  EXPECT_EQ(f.get_string("gpt-oss.rope.scaling.type"), "yarn");
  EXPECT_GT(key(f, "gpt-oss.rope.scaling.original_context_length"), 0);
  const auto mxfp4 = dtype_from_name("mxfp4");
  const DType experts = mxfp4 && ref::dtype_is_supported(*mxfp4) ? *mxfp4 : DType::Q8_0;
  EXPECT_EQ(f.find_tensor("blk.1.ffn_up_exps.weight")->type, experts);
  EXPECT_EQ(f.find_tensor("blk.1.attn_q.weight")->type, DType::Q8_0);
}

TEST(CreateModel, Deepseek2SplitMla) {
  auto m = create_tiny("deepseek2", DType::F16);
  ASSERT_TRUE(m->file);
  const GgufFile& f = *m->file;
  const int64_t q_lora = 256, kv_lora = 256, rope = 32, nope = 64, v_head = 64;
  EXPECT_EQ(key(f, "deepseek2.attention.q_lora_rank"), q_lora);
  EXPECT_EQ(key(f, "deepseek2.attention.kv_lora_rank"), kv_lora);
  EXPECT_EQ(key(f, "deepseek2.attention.key_length"), kv_lora + rope);
  EXPECT_EQ(key(f, "deepseek2.attention.value_length"), kv_lora);
  EXPECT_EQ(key(f, "deepseek2.attention.key_length_mla"), nope + rope);
  EXPECT_EQ(key(f, "deepseek2.attention.value_length_mla"), v_head);
  EXPECT_EQ(key(f, "deepseek2.rope.dimension_count"), rope);
  EXPECT_EQ(key(f, "deepseek2.attention.head_count_kv"), 1);
  for (const char* b : {"blk.0.", "blk.2."}) {
    const std::string p = b;
    EXPECT_EQ(tensor_problem(f, p + "attn_q_a.weight", {kEmbd, q_lora}), "");
    EXPECT_EQ(tensor_problem(f, p + "attn_q_a_norm.weight", {q_lora}), "");
    EXPECT_EQ(tensor_problem(f, p + "attn_q_b.weight", {q_lora, kHeads * (nope + rope)}), "");
    EXPECT_EQ(tensor_problem(f, p + "attn_kv_a_mqa.weight", {kEmbd, kv_lora + rope}), "");
    EXPECT_EQ(tensor_problem(f, p + "attn_kv_a_norm.weight", {kv_lora}), "");
    EXPECT_EQ(tensor_problem(f, p + "attn_k_b.weight", {nope, kv_lora, kHeads}), "");
    EXPECT_EQ(tensor_problem(f, p + "attn_v_b.weight", {kv_lora, v_head, kHeads}), "");
    EXPECT_EQ(tensor_problem(f, p + "attn_output.weight", {kHeads * v_head, kEmbd}), "");
    EXPECT_EQ(f.find_tensor(p + "attn_q.weight"), nullptr);
  }
}

TEST(CreateModel, NLayerAndBigPresetCheckedUpFront) {
  for (const char* arch : {"llama", "qwen3moe", "deepseek2"}) {
    auto m = create_tiny(arch, DType::Q4_0, 2);
    ASSERT_TRUE(m->file);
    EXPECT_EQ(key(*m->file, std::string(arch) + ".block_count"), 2) << arch;
    EXPECT_NE(m->file->find_tensor("blk.1.attn_norm.weight"), nullptr) << arch;
    EXPECT_EQ(m->file->find_tensor("blk.2.attn_norm.weight"), nullptr) << arch;
  }
  CreateModelOptions o;
  o.n_layer = -3;
  EXPECT_NE(create_random_model(o, "/tmp/x.gguf").message().find("--n-layer -3"), std::string::npos);
  o.n_layer = 0;
  o.preset = "30b-a3b";  // a mixture-of-experts preset, not llama's
  EXPECT_NE(create_random_model(o, "/tmp/x.gguf").message().find("--preset '30b-a3b'"), std::string::npos);
}

TEST(CreateModel, SameBytesWithAnyNumberOfThreads) {
  CreateModelOptions o;
  o.arch = "qwen3moe";
  o.type = DType::Q4_K;
  o.n_layer = 2;
  const std::string a = test::temp_path("t1.gguf"), b = test::temp_path("t3.gguf");
  o.threads = 1;
  ASSERT_TRUE(create_random_model(o, a).is_ok());
  o.threads = 3;
  ASSERT_TRUE(create_random_model(o, b).is_ok());
  EXPECT_EQ(test::read_file(a), test::read_file(b));
  std::remove(a.c_str());
  std::remove(b.c_str());
}

TEST(ParamCount, OnlyUsedExpertsAreActive) {
  auto m = create_tiny("qwen3moe", DType::Q8_0);
  ASSERT_TRUE(m->file);
  const GgufFile& f = *m->file;
  int64_t params = 0, expert_params = 0, bytes = 0, expert_bytes = 0;
  for (const auto& t : f.tensors()) {
    params += t.n_elements();
    bytes += int64_t(t.n_bytes);
    if (is_routed_expert_tensor(t.name)) expert_params += t.n_elements(), expert_bytes += int64_t(t.n_bytes);
  }
  EXPECT_EQ(expert_params, 4 * 3 * kEmbd * kFfExp * kExperts);
  const ParamCount c = count_params(f);
  EXPECT_EQ(c.params, params);
  EXPECT_EQ(c.bytes, bytes);
  EXPECT_EQ(c.active_params, params - expert_params + expert_params * 2 / kExperts);
  const GgufTensorInfo& embd = *f.find_tensor("token_embd.weight");
  const int64_t embd_row = int64_t(embd.n_bytes) / embd.dims[1];
  EXPECT_EQ(c.active_bytes, bytes - expert_bytes + expert_bytes * 2 / kExperts - int64_t(embd.n_bytes) + embd_row);
  EXPECT_LT(c.active_params, c.params);
  EXPECT_FALSE(is_routed_expert_tensor("blk.1.ffn_gate_inp.weight"));
  EXPECT_FALSE(is_routed_expert_tensor("blk.1.ffn_up_shexp.weight"));
  EXPECT_TRUE(is_routed_expert_tensor("blk.1.ffn_gate_exps.bias"));
}

TEST(ParamCount, DenseModelIsAllActive) {
  auto m = create_tiny("llama", DType::Q8_0);
  ASSERT_TRUE(m->file);
  const ParamCount c = count_params(*m->file);
  EXPECT_EQ(c.active_params, c.params);
  const GgufTensorInfo& embd = *m->file->find_tensor("token_embd.weight");
  EXPECT_EQ(c.active_bytes, c.bytes - int64_t(embd.n_bytes) + int64_t(embd.n_bytes) / embd.dims[1]);
  // The same file counted as if it had experts changes nothing: it has no expert tensors.
  EXPECT_EQ(count_params(*m->file, 8, 2).active_params, c.params);
}

}  // namespace
}  // namespace autoglm
