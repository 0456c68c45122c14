// MTP speculative decoding with a model's own NextN block: the block's forward against a
// float64 computation over the file's tensors, greedy output equal to plain decoding's (the
// generator and the serving engine), and the refusal of a model without a NextN block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "autoglm/runtime.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "engine/make_drafter.h"
#include "engine/speculative.h"
#include "float_activations.h"
#include "formats/gguf.h"
#include "kernels/ref/quants.h"
#include "model/kv_cache.h"
#include "model/runner.h"
#include "test_util.h"

namespace autoglm {
namespace {

constexpr const char* kGlm = "models/random/rand-glm4moe.gguf";             // one NextN block, blk.3
constexpr const char* kQwen = "models/random/rand-qwen3moe.gguf";           // none
constexpr const char* kDeepseek = "models/random/rand-deepseek2-mla.gguf";  // one, with latent attention

using V = std::vector<double>;

std::unique_ptr<Model> load(const std::string& rel) {
  auto m = Model::load(test::shared_path(rel));
  EXPECT_TRUE(m.is_ok()) << rel << ": " << m.status().message();
  return m ? std::move(m).value() : nullptr;
}

// The file's tensors as doubles.
class Tensors {
 public:
  explicit Tensors(const GgufFile& f) : f_(f) {}
  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }
  V get(const std::string& name) const {
    const GgufTensorInfo* t = f_.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    if (!t) return {};
    std::vector<float> f(size_t(t->n_elements()));
    ref::dequantize_row(t->type, t->data, f.data(), t->n_elements());
    return V(f.begin(), f.end());
  }

 private:
  const GgufFile& f_;
};

// y = W x for W [rows, cols] starting `offset` values into w.
V matvec(const V& w, int64_t rows, int64_t cols, const V& x, int64_t offset = 0) {
  V y(size_t(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) y[size_t(r)] += w[size_t(offset + r * cols + c)] * x[size_t(c)];
  return y;
}

V rmsnorm(const V& x, const V& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  V y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
  return y;
}

void add(V& x, const V& d) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
}

// down (silu(gate x) * up x), the expert's matrices `offset` values into the stacks.
V swiglu(const V& gate, const V& up, const V& down, int64_t n_ff, int64_t n, const V& x, int64_t e) {
  V g = matvec(gate, n_ff, n, x, e * n_ff * n);
  const V u = matvec(up, n_ff, n, x, e * n_ff * n);
  for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
  return matvec(down, n, n_ff, g, e * n * n_ff);
}

struct NextnReference {
  V state;  // the block's output before its head norm (what the next draft takes)
  V logits;
};

// The NextN block of a glm4moe file for one token at position 0 of an empty cache: its one
// key is its own, so each query head's attention output is its KV head's value.
NextnReference nextn_reference(const ModelSpec& s, const Tensors& t, int32_t token, const V& hidden) {
  const int64_t n = s.n_embd;
  const double eps = s.rms_eps;
  const std::string p = "blk." + std::to_string(s.n_layer) + ".";
  const V embd = t.get(t.has(p + "nextn.embed_tokens.weight") ? p + "nextn.embed_tokens.weight" : "token_embd.weight");
  V cat = rmsnorm(V(embd.begin() + token * n, embd.begin() + (token + 1) * n), t.get(p + "nextn.enorm.weight"), eps);
  const V h = rmsnorm(hidden, t.get(p + "nextn.hnorm.weight"), eps);
  cat.insert(cat.end(), h.begin(), h.end());  // [enorm(embedding) ; hnorm(hidden)]
  V x = matvec(t.get(p + "nextn.eh_proj.weight"), n, 2 * n, cat);

  V xn = rmsnorm(x, t.get(p + "attn_norm.weight"), eps);
  V v = matvec(t.get(p + "attn_v.weight"), s.v_dim(), n, xn);
  if (t.has(p + "attn_v.bias")) add(v, t.get(p + "attn_v.bias"));
  V heads;
  for (int64_t head = 0; head < s.n_head; ++head) {
    const int64_t kv = head / (s.n_head / s.n_head_kv);
    heads.insert(heads.end(), v.begin() + kv * s.head_dim_v, v.begin() + (kv + 1) * s.head_dim_v);
  }
  V o = matvec(t.get(p + "attn_output.weight"), n, s.n_head * s.head_dim_v, heads);
  if (t.has(p + "attn_output.bias")) add(o, t.get(p + "attn_output.bias"));
  add(x, o);

  // Sigmoid routing: chosen by probability + selection bias, weighed by probability.
  const MoeSpec& m = s.moe;
  xn = rmsnorm(x, t.get(p + "post_attention_norm.weight"), eps);
  const V router = matvec(t.get(p + "ffn_gate_inp.weight"), m.n_expert, n, xn);
  const V bias = t.has(p + "exp_probs_b.bias") ? t.get(p + "exp_probs_b.bias") : V(size_t(m.n_expert), 0.0);
  V prob(router.size()), score(router.size());
  for (size_t e = 0; e < router.size(); ++e) prob[e] = 1 / (1 + std::exp(-router[e])), score[e] = prob[e] + bias[e];
  std::vector<int64_t> order(size_t(m.n_expert));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return score[size_t(a)] > score[size_t(b)]; });
  double sum = 0;
  for (int64_t i = 0; i < m.n_expert_used; ++i) sum += prob[size_t(order[size_t(i)])];
  const V gate = t.get(p + "ffn_gate_exps.weight"), up = t.get(p + "ffn_up_exps.weight"),
          down = t.get(p + "ffn_down_exps.weight");
  V ffn(size_t(n), 0.0);
  for (int64_t i = 0; i < m.n_expert_used; ++i) {
    const int64_t e = order[size_t(i)];
    const double w = prob[size_t(e)] / (m.norm_weights ? sum : 1.0) * m.weights_scale;
    const V y = swiglu(gate, up, down, m.n_ff_exp, n, xn, e);
    for (int64_t j = 0; j < n; ++j) ffn[size_t(j)] += w * y[size_t(j)];
  }
  if (t.has(p + "ffn_gate_shexp.weight"))
    add(ffn, swiglu(t.get(p + "ffn_gate_shexp.weight"), t.get(p + "ffn_up_shexp.weight"),
                    t.get(p + "ffn_down_shexp.weight"), m.n_ff_shexp, n, xn, 0));
  add(x, ffn);

  NextnReference r;
  r.state = x;
  const V normed = rmsnorm(
      x, t.get(t.has(p + "nextn.shared_head_norm.weight") ? p + "nextn.shared_head_norm.weight" : "output_norm.weight"),
      eps);
  const std::string head = t.has(p + "nextn.shared_head_head.weight") ? p + "nextn.shared_head_head.weight"
                           : t.has("output.weight")                   ? "output.weight"
                                                                      : "token_embd.weight";
  r.logits = matvec(t.get(head), s.n_vocab, n, normed);
  return r;
}

double max_abs(const V& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// The largest difference relative to the reference's largest magnitude.
template <class Got>
double relative_error(const Got& got, const V& want) {
  double d = 0;
  for (size_t i = 0; i < want.size(); ++i) d = std::max(d, std::abs(double(got[i]) - want[i]));
  return d / max_abs(want);
}

ModelSpec block_cache_spec(const ModelSpec& s) {
  ModelSpec one = s;
  one.n_layer = 1;
  one.n_nextn = 0;
  return one;
}

TEST(NextnWeights, BoundAfterTheDecoderLayersOnlyWherePresent) {
  AUTOGLM_REQUIRE_SHARED(kGlm);
  AUTOGLM_REQUIRE_SHARED(kQwen);
  auto glm = load(kGlm), qwen = load(kQwen);
  ASSERT_TRUE(glm && qwen);
  EXPECT_EQ(glm->spec().n_layer, 3);
  EXPECT_EQ(glm->spec().n_nextn, 1);
  EXPECT_EQ(glm->weights().layers.size(), 3u);
  ASSERT_EQ(glm->weights().nextn.size(), 1u);
  EXPECT_EQ(glm->weights().nextn[0].eh_proj.cols, 2 * glm->spec().n_embd);
  EXPECT_TRUE(qwen->weights().nextn.empty());
}

TEST(NextnForward, OneTokenMatchesFloat64OverTheFilesTensors) {
  AUTOGLM_REQUIRE_SHARED(kGlm);
  auto model = load(kGlm);
  ASSERT_TRUE(model && !model->weights().nextn.empty());
  const ModelSpec& s = model->spec();
  ASSERT_EQ(s.moe.gating, ExpertGating::kSigmoid);
  ASSERT_LE(s.moe.n_group, 1) << "the reference has no grouped routing";
  auto file = GgufFile::open(test::shared_path(kGlm));
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  const Tensors tensors(**file);

  ThreadPool pool(2);
  ModelRunner runner(*model, pool);
  for (const int32_t token : {7, 300}) {
    std::vector<float> hidden(size_t(s.n_embd));
    for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = float(2.0 * std::sin(0.37 * double(i) + token));
    ContiguousKvCache cache(block_cache_spec(s), 8, DType::F32, model->device());
    Batch b;
    b.caches = {&cache};
    b.add_sequence_tokens(0, &token, 1, 0, true);
    std::vector<float> logits, state;
    ASSERT_TRUE(runner.forward_nextn(b, hidden.data(), 0, logits).is_ok());
    ASSERT_TRUE(runner.last_hidden(state).is_ok());
    const NextnReference want = nextn_reference(s, tensors, token, V(hidden.begin(), hidden.end()));
    ASSERT_EQ(logits.size(), want.logits.size());
    ASSERT_EQ(state.size(), want.state.size());
    EXPECT_LT(relative_error(logits, want.logits), 1e-4) << "token " << token;
    EXPECT_LT(relative_error(state, want.state), 1e-4) << "token " << token;
    EXPECT_EQ(std::max_element(logits.begin(), logits.end()) - logits.begin(),
              std::max_element(want.logits.begin(), want.logits.end()) - want.logits.begin());
  }
}

// A token's logits do not depend on what else its pass runs.
TEST(NextnForward, TokenResultDoesNotDependOnItsBatch) {
  AUTOGLM_REQUIRE_SHARED(kGlm);
  auto model = load(kGlm);
  ASSERT_TRUE(model);
  const ModelSpec& s = model->spec();
  ThreadPool pool(2);
  ModelRunner runner(*model, pool);
  const std::vector<int32_t> tokens = {5, 77, 123, 9};
  std::vector<float> hidden(tokens.size() * size_t(s.n_embd));
  for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = float(std::cos(0.11 * double(i)));
  const auto run = [&](size_t first, size_t n, ContiguousKvCache& cache, ContiguousKvCache* other) {
    Batch b;
    b.caches = {&cache};
    if (other) b.caches.push_back(other);
    b.add_sequence_tokens(0, tokens.data() + first, int64_t(n), int32_t(first), true);
    std::vector<float> in(hidden.begin() + ptrdiff_t(first) * s.n_embd,
                          hidden.begin() + ptrdiff_t(first + n) * s.n_embd);
    if (other) {  // another sequence's token in the same pass
      b.add_sequence_tokens(1, tokens.data(), 1, 0, true);
      in.insert(in.end(), hidden.begin(), hidden.begin() + s.n_embd);
    }
    std::vector<float> logits;
    EXPECT_TRUE(runner.forward_nextn(b, in.data(), 0, logits).is_ok());
    return std::vector<float>(logits.begin(), logits.begin() + s.n_vocab);
  };
  ContiguousKvCache alone(block_cache_spec(s), 8, DType::F32, model->device());
  run(0, 3, alone, nullptr);
  const std::vector<float> want = run(3, 1, alone, nullptr);
  ContiguousKvCache batched(block_cache_spec(s), 8, DType::F32, model->device()),
      other(block_cache_spec(s), 8, DType::F32, model->device());
  run(0, 3, batched, nullptr);
  EXPECT_EQ(run(3, 1, batched, &other), want);
}

struct Loaded {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

Loaded load_with_tokenizer(const std::string& rel) {
  Loaded l;
  l.model = load(rel);
  if (!l.model) return l;
  auto t = l.model->load_tokenizer();
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  if (t) l.tokenizer = std::move(t).value();
  return l;
}

GenerationRequest greedy(const std::vector<int32_t>& prompt, int32_t max_tokens) {
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  return r;
}

std::vector<int32_t> some_prompt(int64_t n, int32_t seed) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(int32_t(3 + (seed * 131 + i * 197) % 500));
  return t;
}

SpecConfig mtp(int32_t draft_max) {
  SpecConfig c;
  c.method = SpecMethod::kMtp;
  c.draft_max = draft_max;
  return c;
}

// The files with a NextN block: glm4moe, and deepseek2 (its block has latent attention).
class MtpModel : public ::testing::TestWithParam<const char*> {};

TEST_P(MtpModel, GreedyTokensAreThoseOfPlainDecoding) {
  AUTOGLM_REQUIRE_SHARED(GetParam());
  const Loaded l = load_with_tokenizer(GetParam());
  ASSERT_TRUE(l.model && l.tokenizer);
  ThreadPool pool(2);
  for (const int32_t chunk : {512, 7}) {  // one prefill pass, or many: the block sees every row
    for (const int32_t draft_max : {1, 3, 6}) {
      const GenerationRequest r = greedy(some_prompt(40, draft_max), 64);
      Generator plain(*l.model, *l.tokenizer, pool, 256);
      auto want = plain.generate(r, {}, chunk);
      ASSERT_TRUE(want.is_ok()) << want.status().message();
      Generator fast(*l.model, *l.tokenizer, pool, 256);
      ASSERT_TRUE(fast.set_speculation(mtp(draft_max)).is_ok());
      auto got = fast.generate(r, {}, chunk);
      ASSERT_TRUE(got.is_ok()) << got.status().message();
      EXPECT_EQ(got->tokens, want->tokens) << "draft-max " << draft_max << ", prefill chunk " << chunk;
      EXPECT_GT(got->spec.drafted, 0) << "the drafter never proposed: the test checks nothing";
      EXPECT_EQ(got->spec.emitted, int64_t(got->tokens.size()) - 1);
      std::printf(
          "%s: mtp draft-max %d, prefill chunk %d: drafted %lld, accepted %lld (%.1f%%), %.2f tokens per pass\n",
          GetParam(), draft_max, chunk, (long long)got->spec.drafted, (long long)got->spec.accepted,
          100.0 * got->spec.acceptance(), got->spec.tokens_per_pass());
      // A second request on the same generator starts over (the drafter forgets the first).
      auto again = fast.generate(r, {}, chunk);
      ASSERT_TRUE(again.is_ok());
      EXPECT_EQ(again->tokens, want->tokens);
    }
  }
}

// The target's pass over `tokens` from `pos` (every row's logits), its hidden rows shown to the drafter.
void run_target(ModelRunner& runner, KvCache& cache, Drafter& drafter, const std::vector<int32_t>& tokens, int32_t pos,
                std::vector<float>& logits) {
  Batch b;
  b.caches = {&cache};
  b.add_sequence_tokens(0, tokens.data(), int64_t(tokens.size()), pos, true, /*logits_for_all=*/true);
  ASSERT_TRUE(runner.forward(b, logits).is_ok());
  std::vector<float> hidden;
  ASSERT_TRUE(runner.last_hidden(hidden).is_ok());
  drafter.observe_target(0, pos, hidden.data(), int64_t(tokens.size()));
}

int32_t argmax_row(const std::vector<float>& logits, int64_t row, int64_t n_vocab) {
  const auto first = logits.begin() + row * n_vocab;
  return int32_t(std::max_element(first, first + n_vocab) - first);
}

std::unique_ptr<Drafter> mtp_drafter(const Model& model, ThreadPool& pool, int32_t draft_max) {
  auto d = make_drafter(mtp(draft_max), model, nullptr, pool, DraftPool{32, 16, DType::F32});
  EXPECT_TRUE(d.is_ok()) << d.status().message();
  return d ? std::move(d).value() : nullptr;
}

// The random model's drafts are never accepted: here the history takes 0 to 4 of each pass's
// drafts as a target that agreed would, and every call's drafts must equal those of a fresh
// drafter shown the whole history at once (the rows of accepted drafts are kept, the others
// rewritten).
TEST_P(MtpModel, DraftsEqualThoseOfTheWholeHistoryAtOnce) {
  AUTOGLM_REQUIRE_SHARED(GetParam());
  auto model = load(GetParam());
  ASSERT_TRUE(model);
  const int64_t n_vocab = model->spec().n_vocab;
  ThreadPool pool(2);
  ModelRunner runner(*model, pool);
  ContiguousKvCache cache(model->spec(), 256, DType::F32, model->device());
  auto drafter = mtp_drafter(*model, pool, 4);
  ASSERT_TRUE(drafter);
  std::vector<float> logits;
  std::vector<int32_t> history = some_prompt(30, 5);
  run_target(runner, cache, *drafter, history, 0, logits);
  history.push_back(argmax_row(logits, int64_t(history.size()) - 1, n_vocab));
  for (int32_t round = 0; round < 6; ++round) {
    DraftJob job;
    job.history = &history;
    job.max_tokens = 4;
    ASSERT_TRUE(drafter->propose(std::span(&job, 1)).is_ok());
    ASSERT_EQ(job.drafts.size(), 4u);
    {  // the same history, all of it in one pass
      ModelRunner fresh_runner(*model, pool);
      ContiguousKvCache fresh_cache(model->spec(), 256, DType::F32, model->device());
      auto fresh = mtp_drafter(*model, pool, 4);
      std::vector<float> ignored;
      run_target(fresh_runner, fresh_cache, *fresh, std::vector<int32_t>(history.begin(), history.end() - 1), 0,
                 ignored);
      DraftJob whole = job;
      ASSERT_TRUE(fresh->propose(std::span(&whole, 1)).is_ok());
      EXPECT_EQ(job.drafts, whole.drafts) << "round " << round;
    }
    std::vector<int32_t> pass{history.back()};
    pass.insert(pass.end(), job.drafts.begin(), job.drafts.end());
    run_target(runner, cache, *drafter, pass, int32_t(history.size()) - 1, logits);
    const int32_t kept = round % 5;
    history.insert(history.end(), job.drafts.begin(), job.drafts.begin() + kept);
    history.push_back(argmax_row(logits, kept, n_vocab));
  }
}

INSTANTIATE_TEST_SUITE_P(NextnFiles, MtpModel, ::testing::Values(kGlm, kDeepseek), [](const auto& info) {
  return std::string(info.param).find("glm4moe") != std::string::npos ? "glm4moe" : "deepseek2_mla";
});

std::vector<int32_t> collect(const std::shared_ptr<StreamHandle>& h) {
  std::vector<int32_t> tokens;
  StreamEvent ev;
  while (h->next(ev, std::chrono::seconds(60))) {
    tokens.insert(tokens.end(), ev.tokens.begin(), ev.tokens.end());
    if (ev.finished) break;
  }
  return tokens;
}

TEST(MtpSpeculation, ServingEngineGivesEachRequestItsPlainTokens) {
  AUTOGLM_REQUIRE_SHARED(kGlm);
  const Loaded l = load_with_tokenizer(kGlm);
  ASSERT_TRUE(l.model && l.tokenizer);
  ThreadPool pool(2);
  EngineConfig cfg;
  cfg.n_ctx = 256;
  cfg.kv_blocks = 128;
  cfg.max_batch_tokens = 32;  // prompts in several chunks
  cfg.spec = mtp(4);
  std::vector<GenerationRequest> requests;
  for (int32_t i = 0; i < 4; ++i) requests.push_back(greedy(some_prompt(20 + 9 * i, 11 + i), 40));
  Engine engine(*l.model, *l.tokenizer, pool, cfg);
  std::vector<std::shared_ptr<StreamHandle>> handles;
  for (const GenerationRequest& r : requests) handles.push_back(*engine.submit(r));
  Generator plain(*l.model, *l.tokenizer, pool, 256);
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(collect(handles[i]), plain.generate(requests[i])->tokens) << i;
  const int64_t drafted = engine.stats().spec_drafted.load(), accepted = engine.stats().spec_accepted.load();
  EXPECT_GT(drafted, 0);
  std::printf("engine mtp: drafted %lld, accepted %lld (%.1f%%)\n", (long long)drafted, (long long)accepted,
              drafted ? 100.0 * double(accepted) / double(drafted) : 0.0);
}

TEST(MtpSpeculation, AModelWithoutANextnBlockIsRefusedByName) {
  AUTOGLM_REQUIRE_SHARED(kQwen);
  const Loaded l = load_with_tokenizer(kQwen);
  ASSERT_TRUE(l.model && l.tokenizer);
  EXPECT_EQ(spec_method_from_name("mtp").value(), SpecMethod::kMtp);
  ThreadPool pool(2);
  Generator gen(*l.model, *l.tokenizer, pool, 64);
  const Status st = gen.set_speculation(mtp(4));
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("spec mtp"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rand-qwen3moe"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("NextN"), std::string::npos) << st.message();

  RuntimeOptions o;  // serve: refused at open, before the engine starts
  o.threads = 2;
  o.kv_memory_mib = 16;
  o.speculative = SpecMethod::kMtp;
  auto rt = Runtime::open(test::shared_path(kQwen), o);
  ASSERT_FALSE(rt.is_ok());
  EXPECT_NE(rt.status().message().find("speculative: spec mtp"), std::string::npos) << rt.status().message();
  EXPECT_NE(rt.status().message().find("rand-qwen3moe"), std::string::npos) << rt.status().message();
}

}  // namespace
}  // namespace autoglm
