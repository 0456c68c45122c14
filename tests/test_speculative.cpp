// Speculative decoding: every drafter gives plain decoding's output (greedy and seeded
// sampling), sampled tokens follow the target's distribution, grammars hold, the KV rows left
// behind are plain decoding's, and a draft with another vocabulary is refused.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/generator.h"
#include "engine/model_drafter.h"
#include "engine/ngram_drafter.h"
#include "engine/speculative.h"
#include "kernels/cpu/decode_speed.h"
#include "sample/json_schema.h"
#include "test_util.h"

namespace autoglm {
namespace {

struct Loaded {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

Loaded load(const std::string& rel, std::optional<DType> quantize = std::nullopt) {
  Loaded l;
  ModelLoadOptions o;
  o.quantize = quantize;
  auto m = Model::load(test::shared_path(rel), o);
  EXPECT_TRUE(m.is_ok()) << rel << ": " << m.status().message();
  if (!m) return l;
  l.model = std::move(m).value();
  auto t = l.model->load_tokenizer();
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  if (t) l.tokenizer = std::move(t).value();
  return l;
}

SpecConfig spec(SpecMethod method, int32_t exit_layer = 0) {
  SpecConfig c;
  c.method = method;
  c.draft_max = 6;
  c.exit_layer = exit_layer;
  return c;
}

GenerationResult generate(const Loaded& target, const GenerationRequest& request, const SpecConfig& config,
                          const Model* draft = nullptr, Generator** keep = nullptr) {
  static ThreadPool pool(2);
  auto* gen = new Generator(*target.model, *target.tokenizer, pool, 256);
  EXPECT_TRUE(gen->set_speculation(config, draft).is_ok());
  auto r = gen->generate(request);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  if (keep)
    *keep = gen;
  else
    delete gen;
  return r ? std::move(r).value() : GenerationResult{};
}

GenerationRequest request(const Loaded& l, const std::string& prompt, int32_t max_tokens, float temperature = 0) {
  GenerationRequest r;
  r.prompt = l.tokenizer->encode(prompt, true);
  r.max_tokens = max_tokens;
  r.sampling.temperature = temperature;
  r.ignore_eos = true;
  return r;
}

// A story that repeats itself, so the n-gram drafter finds matches.
const char* kRepetitive =
    "Lily went to the park. She saw a big dog. Lily went to the park. She saw a big dog. Lily went to the";

struct Case {
  const char* model;
  SpecMethod method;
  std::optional<DType> draft_type;  // kDraft: the target's weights in this type
  bool own_cache = false;           // kDraft: in a KV cache of its own, not the target's
};

// For gtest's "GetParam() = ...": "stories260K.gguf, draft, Q8_0 weights, own cache".
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << ", " << spec_method_name(c.method);
  if (c.draft_type) *os << ", " << dtype_name(*c.draft_type) << " weights";
  if (c.own_cache) *os << ", own cache";
}

// "random/rand-llama-gqa-f16.gguf" with kDraft in Q8_0 -> "rand_llama_gqa_f16_draft_q8_0"
std::string case_name(const Case& c) {
  std::string s = std::filesystem::path(c.model).stem().string();
  s.append("_").append(spec_method_name(c.method));
  if (c.draft_type) {
    std::string type(dtype_name(*c.draft_type));
    for (char& ch : type) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    s.append("_").append(type);
  }
  if (c.own_cache) s.append("_own_cache");
  return test::param_name(s);
}

class GreedyExactness : public ::testing::TestWithParam<Case> {};

TEST_P(GreedyExactness, TokensAreThoseOfPlainDecoding) {
  const Case c = GetParam();
  AUTOGLM_REQUIRE_SHARED(std::string("models/") + c.model);
  const Loaded target = load(std::string("models/") + c.model);
  ASSERT_TRUE(target.model && target.tokenizer);
  Loaded draft;
  if (c.draft_type) {
    draft = load(std::string("models/") + c.model, c.draft_type);
    ASSERT_TRUE(draft.model);
  }
  const GenerationRequest r = request(target, kRepetitive, 48);
  const GenerationResult plain = generate(target, r, spec(SpecMethod::kNone));
  SpecConfig config = spec(c.method, 1);
  config.share_target_cache = !c.own_cache;
  const GenerationResult fast = generate(target, r, config, draft.model.get());
  EXPECT_EQ(fast.tokens, plain.tokens);
  EXPECT_EQ(fast.text, plain.text);
  EXPECT_GT(fast.spec.drafted, 0) << "the drafter never proposed: the test checks nothing";
  EXPECT_EQ(fast.spec.emitted, int64_t(fast.tokens.size()) - 1);  // the first token comes from the prefill
  EXPECT_LE(fast.spec.target_passes, plain.spec.target_passes);
  EXPECT_EQ(plain.spec.target_passes, int64_t(plain.tokens.size()) - 1);
}

INSTANTIATE_TEST_SUITE_P(Drafters, GreedyExactness,
                         ::testing::Values(Case{"stories260K.gguf", SpecMethod::kNgram, {}},
                                           Case{"stories260K.gguf", SpecMethod::kEarlyExit, {}},
                                           Case{"stories260K.gguf", SpecMethod::kDraft, DType::Q8_0},
                                           Case{"stories260K.gguf", SpecMethod::kDraft, DType::Q4_0},
                                           Case{"stories260K.gguf", SpecMethod::kDraft, DType::Q4_0, true},
                                           Case{"random/rand-llama-gqa-f16.gguf", SpecMethod::kDraft, DType::Q8_0},
                                           Case{"random/rand-llama-gqa-bf16.gguf", SpecMethod::kEarlyExit, {}},
                                           Case{"random/rand-llama-gqa-q6_k.gguf", SpecMethod::kNgram, {}},
                                           Case{"random/rand-llama-gqa-q4_0.gguf", SpecMethod::kDraft, DType::Q8_0},
                                           Case{"random/rand-qwen2.gguf", SpecMethod::kEarlyExit, {}},
                                           Case{"random/rand-chatglm.gguf", SpecMethod::kDraft, DType::Q4_0},
                                           Case{"hf/llama3-tiny", SpecMethod::kDraft, DType::Q8_0},
                                           Case{"hf/llama3-tiny", SpecMethod::kDraft, DType::Q8_0, true},
                                           Case{"hf/qwen2-tiny", SpecMethod::kEarlyExit, {}}),
                         [](const auto& info) { return case_name(info.param); });

TEST(Speculation, ADraftFromAnotherFileOfTheSameModelIsExact) {
  AUTOGLM_REQUIRE_SHARED("models/random/rand-llama-gqa-q4_k.gguf");
  const Loaded target = load("models/random/rand-llama-gqa-f16.gguf");
  auto draft = load_draft_model({test::shared_path("models/random/rand-llama-gqa-q4_k.gguf"), ""}, "",
                                target.tokenizer->vocab());
  ASSERT_TRUE(draft.is_ok()) << draft.status().message();
  const GenerationRequest r = request(target, kRepetitive, 40);
  const GenerationResult plain = generate(target, r, spec(SpecMethod::kNone));
  for (bool share : {true, false}) {
    SpecConfig c = spec(SpecMethod::kDraft);
    c.share_target_cache = share;
    const GenerationResult fast = generate(target, r, c, draft->get());
    EXPECT_EQ(fast.tokens, plain.tokens) << share;
    EXPECT_GT(fast.spec.accepted, 0) << share;
  }
}

class Stories : public ::testing::Test {
 protected:
  void SetUp() override {
    AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
    target = load("models/stories260K.gguf");
    draft = load("models/stories260K.gguf", DType::Q4_0);
    ASSERT_TRUE(target.model && draft.model);
  }
  void check_rows_after(SpecMethod method);
  Loaded target, draft;
};

TEST_F(Stories, SeededSamplingGivesPlainDecodingsTokens) {
  for (SpecMethod method : {SpecMethod::kNgram, SpecMethod::kDraft, SpecMethod::kEarlyExit})
    for (uint64_t seed : {1u, 2u, 3u}) {
      GenerationRequest r = request(target, kRepetitive, 40, 0.9f);
      r.sampling.seed = seed;
      r.sampling.repetition_penalty = 1.1f;
      const GenerationResult plain = generate(target, r, spec(SpecMethod::kNone));
      const GenerationResult fast = generate(target, r, spec(method, 2), draft.model.get());
      EXPECT_EQ(fast.tokens, plain.tokens) << spec_method_name(method) << " seed " << seed;
    }
}

// The sampler's distribution over one row: top-k of logits / temperature, renormalised.
std::map<int32_t, double> top_k_distribution(const float* row, int32_t n, int32_t k, float temperature) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) ids[size_t(i)] = i;
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  std::map<int32_t, double> p;
  double sum = 0;
  for (int32_t i = 0; i < k; ++i)
    sum += p[ids[size_t(i)]] = std::exp(double(row[ids[size_t(i)]] - row[ids[0]]) / temperature);
  for (auto& [id, v] : p) v /= sum;
  return p;
}

// Pearson's statistic over the outcomes (bins under 5 expected merged into one) and its
// degrees of freedom.
std::pair<double, int> chi_square(const std::map<int32_t, double>& expected_share, const std::map<int32_t, int>& seen,
                                  int draws) {
  double stat = 0, small_expected = 0;
  int small_seen = 0, bins = 0;
  for (const auto& [id, share] : expected_share) {
    const double e = share * draws;
    const int o = seen.count(id) ? seen.at(id) : 0;
    if (e < 5) {
      small_expected += e, small_seen += o;
      continue;
    }
    stat += (o - e) * (o - e) / e;
    ++bins;
  }
  if (small_expected > 0)
    stat += (small_seen - small_expected) * (small_seen - small_expected) / small_expected, ++bins;
  int outside = 0;  // outcomes the target gives no probability
  for (const auto& [id, count] : seen)
    if (!expected_share.count(id)) outside += count;
  EXPECT_EQ(outside, 0) << "sampled tokens the target's top-k excludes";
  return {stat, bins - 1};
}

// The chi-square value a statistic exceeds with probability 0.001 (Wilson-Hilferty).
double chi_square_critical(int df) {
  const double a = 2.0 / (9.0 * df), z = 3.09;
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

TEST_F(Stories, SampledTokensFollowTheTargetDistribution) {
  // The third token's law, by enumeration over the first two (top-k keeps this small), against
  // what speculative generation draws with as many seeds. Its draft (the q4_0 self-draft) is
  // sometimes accepted and sometimes not, so both branches of verification are sampled.
  constexpr int32_t kTopK = 3;
  constexpr float kTemperature = 1.5f;
  constexpr int kDraws = 1500;
  GenerationRequest r = request(target, "Once upon a time", 3, kTemperature);
  r.sampling.top_k = kTopK;
  r.sampling.top_p = 1.0f;
  r.sampling.min_p = 0.0f;
  static ThreadPool pool(2);
  Generator plain(*target.model, *target.tokenizer, pool, 64);
  const int32_t n_vocab = int32_t(target.model->spec().n_vocab);
  auto next_law = [&](const std::vector<int32_t>& context) {
    auto logits = plain.evaluate(context, false);
    EXPECT_TRUE(logits.is_ok());
    return top_k_distribution(logits->data(), n_vocab, kTopK, kTemperature);
  };
  std::map<int32_t, double> first = next_law(r.prompt), third;
  for (const auto& [t0, p0] : first) {
    auto c1 = r.prompt;
    c1.push_back(t0);
    for (const auto& [t1, p1] : next_law(c1)) {
      auto c2 = c1;
      c2.push_back(t1);
      for (const auto& [t2, p2] : next_law(c2)) third[t2] += p0 * p1 * p2;
    }
  }
  Generator fast(*target.model, *target.tokenizer, pool, 64);
  SpecConfig c = spec(SpecMethod::kDraft);
  c.draft_max = 2;
  ASSERT_TRUE(fast.set_speculation(c, draft.model.get()).is_ok());
  std::map<int32_t, int> seen_first, seen_third;
  int64_t accepted = 0, drafted = 0;
  for (int i = 0; i < kDraws; ++i) {
    r.sampling.seed = uint64_t(1000 + i);
    auto out = fast.generate(r);
    ASSERT_TRUE(out.is_ok() && out->tokens.size() == 3);
    ++seen_first[out->tokens[0]];
    ++seen_third[out->tokens[2]];
    accepted += out->spec.accepted, drafted += out->spec.drafted;
  }
  ASSERT_GT(accepted, 0);
  ASSERT_LT(accepted, drafted);
  for (const auto& [law, seen] : {std::pair{&first, &seen_first}, std::pair{&third, &seen_third}}) {
    const auto [stat, df] = chi_square(*law, *seen, kDraws);
    ASSERT_GE(df, 1);
    EXPECT_LT(stat, chi_square_critical(df)) << "df " << df;
  }
}

TEST_F(Stories, GrammarConstrainedOutputStaysValid) {
  const nlohmann::json schema = {
      {"type", "object"}, {"properties", {{"name", {{"type", "string"}, {"maxLength", 10}}}}}, {"required", {"name"}}};
  auto gbnf = json_schema_to_gbnf(schema);
  ASSERT_TRUE(gbnf.is_ok());
  auto grammar = Grammar::parse(*gbnf);
  ASSERT_TRUE(grammar.is_ok());
  GenerationRequest r = request(target, "Lily said", 60);
  r.ignore_eos = false;
  r.grammar = *grammar;
  const GenerationResult plain = generate(target, r, spec(SpecMethod::kNone));
  for (SpecMethod method : {SpecMethod::kNgram, SpecMethod::kDraft, SpecMethod::kEarlyExit}) {
    const GenerationResult fast = generate(target, r, spec(method, 2), draft.model.get());
    EXPECT_EQ(fast.text, plain.text) << spec_method_name(method);
    EXPECT_TRUE(nlohmann::json::accept(fast.text)) << fast.text;
  }
}

TEST_F(Stories, RejectedDraftsLeaveTheRowsOfPlainDecoding) {
  // Early exit and a self-draft write the target's own cache, and every drafter's rejected
  // positions are written by the verifying pass: the rows of every position the output used
  // must be what plain decoding wrote, bit for bit, and a following request on the same
  // generator is unaffected. (The long accepted runs of the n-gram drafter and the self-draft
  // are what found silu_mul's batch-dependent tail.)
  for (SpecMethod method : {SpecMethod::kEarlyExit, SpecMethod::kDraft, SpecMethod::kNgram}) {
    SCOPED_TRACE(spec_method_name(method));
    check_rows_after(method);
  }
}

void Stories::check_rows_after(SpecMethod method) {
  const GenerationRequest r = request(target, kRepetitive, 40, 0.7f);
  GenerationRequest seeded = r;
  seeded.sampling.seed = 7;
  Generator* plain_gen = nullptr;
  Generator* fast_gen = nullptr;
  const GenerationResult plain = generate(target, seeded, spec(SpecMethod::kNone), nullptr, &plain_gen);
  const GenerationResult fast = generate(target, seeded, spec(method, 2), draft.model.get(), &fast_gen);
  std::unique_ptr<Generator> own_plain(plain_gen), own_fast(fast_gen);
  ASSERT_EQ(fast.tokens, plain.tokens);
  ASSERT_GT(fast.spec.drafted, fast.spec.accepted) << "no rejection: the test checks nothing";
  const int64_t written = int64_t(r.prompt.size() + plain.tokens.size()) - 1;  // the last token is never run
  KvCache& a = plain_gen->kv_cache();
  KvCache& b = fast_gen->kv_cache();
  for (int64_t layer = 0; layer < target.model->spec().n_layer; ++layer)
    for (int64_t pos = 0; pos < written; ++pos) {
      ASSERT_EQ(0, std::memcmp(a.key_row(layer, pos), b.key_row(layer, pos), size_t(a.format().k_row_bytes)))
          << "layer " << layer << " position " << pos;
      ASSERT_EQ(0, std::memcmp(a.value_row(layer, pos), b.value_row(layer, pos), size_t(a.format().v_row_bytes)))
          << "layer " << layer << " position " << pos;
    }
  GenerationRequest next = request(target, "Once upon a time", 20);
  ASSERT_TRUE(fast_gen->set_speculation(spec(SpecMethod::kNone)).is_ok());
  auto after = fast_gen->generate(next);
  auto fresh = plain_gen->generate(next);
  ASSERT_TRUE(after.is_ok() && fresh.is_ok());
  EXPECT_EQ(after->tokens, fresh->tokens);
}

// Jobs drafted together (one batched pass per position) get the drafts each gets alone, also
// after their histories move on (the draft cache catches up) and when the draft model's pool
// is too small for them all (other sequences give their blocks back; a job without room
// drafts nothing).
TEST_F(Stories, BatchedModelDraftsEqualDraftsAlone) {
  static ThreadPool pool(2);
  std::vector<std::vector<int32_t>> histories;
  for (const char* p : {"Once upon a time", "Lily and Ben went to", "The sun was hot and"})
    histories.push_back(target.tokenizer->encode(p, true));
  auto alone = [&](const std::vector<int32_t>& history, int32_t n) {
    ModelDrafter fresh(*draft.model, pool, 64, 16, DType::F16, 0.0f);
    DraftJob job;
    job.history = &history;
    job.max_tokens = n;
    EXPECT_TRUE(fresh.propose(std::span(&job, 1)).is_ok());
    return job.drafts;
  };
  auto together = [&](ModelDrafter& d, int32_t n) {
    std::vector<DraftJob> jobs(histories.size());
    for (size_t i = 0; i < jobs.size(); ++i)
      jobs[i].sequence = i, jobs[i].history = &histories[i], jobs[i].max_tokens = n;
    EXPECT_TRUE(d.propose(jobs).is_ok());
    return jobs;
  };
  ModelDrafter roomy(*draft.model, pool, 64, 16, DType::F16, 0.0f);
  for (int round = 0; round < 3; ++round) {
    const std::vector<DraftJob> jobs = together(roomy, 4);
    for (size_t i = 0; i < jobs.size(); ++i) {
      ASSERT_EQ(jobs[i].drafts.size(), 4u);
      EXPECT_EQ(jobs[i].drafts, alone(histories[i], 4)) << "round " << round << " job " << i;
      // The history moves on as after a verification: some drafts kept, then another token.
      histories[i].insert(histories[i].end(), jobs[i].drafts.begin(), jobs[i].drafts.begin() + long(i + round) % 5);
      histories[i].push_back(int32_t(7 + i));
    }
  }
  // Two blocks of 16 positions: one sequence fits at a time.
  ModelDrafter cramped(*draft.model, pool, 2, 16, DType::F16, 0.0f);
  for (auto& h : histories) h.resize(20, 9);  // 23 positions with the drafts: two blocks
  std::vector<DraftJob> one = together(cramped, 4);
  EXPECT_EQ(one[0].drafts, alone(histories[0], 4));
  EXPECT_TRUE(one[1].drafts.empty() && one[2].drafts.empty());
  std::vector<DraftJob> other(1);
  other[0].sequence = 2, other[0].history = &histories[2], other[0].max_tokens = 4;
  ASSERT_TRUE(cramped.propose(other).is_ok());  // sequence 0 gives its blocks back
  EXPECT_EQ(other[0].drafts, alone(histories[2], 4));
  // A job whose history the draft cache lacks more of than its limit drafts nothing.
  ModelDrafter limited(*draft.model, pool, 64, 16, DType::F16, 0.0f);
  std::vector<DraftJob> far(1);
  far[0].history = &histories[0], far[0].max_tokens = 4, far[0].catch_up_limit = 19;  // 20 to run
  EXPECT_EQ(catch_up_limit(19), 64);  // a short catch-up is always worth it
  EXPECT_EQ(catch_up_limit(300), 600);
  ASSERT_TRUE(limited.propose(far).is_ok());
  EXPECT_TRUE(far[0].drafts.empty());
  far[0].catch_up_limit = 20;
  ASSERT_TRUE(limited.propose(far).is_ok());
  EXPECT_EQ(far[0].drafts, alone(histories[0], 4));
}

TEST(Speculation, ADraftWithAnotherVocabularyIsRefused) {
  AUTOGLM_REQUIRE_SHARED("models/llama-2-tiny-random.gguf");
  const Loaded target = load("models/stories260K.gguf");
  auto other =
      load_draft_model({test::shared_path("models/llama-2-tiny-random.gguf"), ""}, "", target.tokenizer->vocab());
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.status().message().find("draft model: its vocabulary has"), std::string::npos)
      << other.status().message();
  Vocab changed = target.tokenizer->vocab();
  changed.pieces[300] += "x";
  const Status s = check_same_vocabulary(target.tokenizer->vocab(), changed);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("token 300 "), std::string::npos) << s.message();
  changed = target.tokenizer->vocab();
  changed.eos = 5;
  EXPECT_NE(check_same_vocabulary(target.tokenizer->vocab(), changed).message().find("BOS/EOS"), std::string::npos);
  EXPECT_TRUE(check_same_vocabulary(target.tokenizer->vocab(), target.tokenizer->vocab()).is_ok());
}

TEST(Speculation, OptionsOutOfRangeAreRefusedByName) {
  EXPECT_EQ(spec_method_from_name("early-exit").value(), SpecMethod::kEarlyExit);
  EXPECT_NE(spec_method_from_name("medusa").status().message().find("'medusa'"), std::string::npos);
  SpecConfig c;
  EXPECT_TRUE(validate_spec_config(c, 8).is_ok());
  c.draft_max = 0;
  EXPECT_NE(validate_spec_config(c, 8).message().find("draft-max"), std::string::npos);
  c = {};
  c.draft_min = 9;
  EXPECT_NE(validate_spec_config(c, 8).message().find("draft-min"), std::string::npos);
  c = {};
  c.p_min = 1.5f;
  EXPECT_NE(validate_spec_config(c, 8).message().find("draft-p-min"), std::string::npos);
  c = {};
  c.exit_layer = 8;
  EXPECT_NE(validate_spec_config(c, 8).message().find("exit-layer"), std::string::npos);
}

TEST(NgramDrafter, ProposesWhatFollowedTheLongestRecentMatch) {
  NgramDrafter d(1, 3, 0.0f);
  // "5 6 7" occurred earlier followed by 8 9; "7" alone more recently followed by 1.
  EXPECT_EQ(d.lookup({5, 6, 7, 8, 9, 7, 1, 5, 6, 7}, 4), (std::vector<int32_t>{8, 9, 7, 1}));
  EXPECT_EQ(d.lookup({5, 6, 7, 8, 9, 7, 1, 5, 6, 7}, 2), (std::vector<int32_t>{8, 9}));
  EXPECT_TRUE(d.lookup({1, 2, 3, 4}, 4).empty());
  // The match's continuation runs into the key.
  EXPECT_EQ(d.lookup({3, 1, 3}, 4), (std::vector<int32_t>{1, 3}));
  // Through the Drafter interface: one job each.
  const std::vector<int32_t> a{5, 6, 7, 8, 9, 7, 1, 5, 6, 7}, b{1, 2, 3, 4};
  std::vector<DraftJob> jobs(2);
  jobs[0].history = &a, jobs[0].max_tokens = 3;
  jobs[1].history = &b, jobs[1].max_tokens = 3, jobs[1].drafts = {9};
  ASSERT_TRUE(d.propose(jobs).is_ok());
  EXPECT_EQ(jobs[0].drafts, (std::vector<int32_t>{8, 9, 7}));
  EXPECT_TRUE(jobs[1].drafts.empty());
}

TEST(NgramDrafter, AnAmbiguousKeyUnderPMinProposesNothing) {
  // "4" was followed by 1 once and by 2 once: confidence 0.5.
  EXPECT_TRUE(NgramDrafter(1, 1, 0.6f).lookup({4, 1, 4, 2, 4}, 3).empty());
  EXPECT_EQ(NgramDrafter(1, 1, 0.5f).lookup({4, 1, 4, 2, 4}, 3), (std::vector<int32_t>{2, 4}));
}

// --draft-quantize auto: the type that decodes fastest here, among those smaller than the
// target's (a self-draft as large as its target saves nothing); none smaller is an error.
TEST(Speculation, AutoDraftTypeIsTheFastestSmallerOne) {
  ThreadPool pool(2);
  auto for_f16 = auto_draft_type(pool, DType::F16);
  ASSERT_TRUE(for_f16.is_ok()) << for_f16.status().message();
  EXPECT_TRUE(*for_f16 == DType::Q8_0 || *for_f16 == DType::Q4_K || *for_f16 == DType::Q4_0) << dtype_name(*for_f16);
  auto for_q8 = auto_draft_type(pool, DType::Q8_0);
  ASSERT_TRUE(for_q8.is_ok()) << for_q8.status().message();
  EXPECT_TRUE(*for_q8 == DType::Q4_K || *for_q8 == DType::Q4_0) << dtype_name(*for_q8);
  auto for_q4 = auto_draft_type(pool, DType::Q4_0);
  ASSERT_FALSE(for_q4.is_ok());
  EXPECT_NE(for_q4.status().message().find("(Q4_0) are no larger"), std::string::npos) << for_q4.status().message();
  // Ties (within 5%) go to the type listed first, the more accurate.
  using S = cpu::DecodeSpeed;
  EXPECT_EQ(cpu::fastest_type(std::vector<S>{{DType::Q8_0, 1.0}, {DType::Q4_K, 0.97}, {DType::Q4_0, 0.5}}),
            DType::Q4_0);
  EXPECT_EQ(cpu::fastest_type(std::vector<S>{{DType::Q8_0, 1.0}, {DType::Q4_K, 0.97}}), DType::Q8_0);
  EXPECT_EQ(cpu::fastest_type(std::vector<S>{{DType::Q8_0, 1.0}, {DType::Q4_K, 0.9}}), DType::Q4_K);
}

// The length that pays most: long while everything is kept (up to draft-max), short when the
// target keeps about half, and off (longer each time) when drafting costs more than it brings.
TEST(DraftLength, DraftsWhatPaysForItsCost) {
  DraftLength cheap(8, 0, 0.25);
  for (int i = 0; i < 20; ++i) cheap.record(cheap.next(), cheap.next());
  EXPECT_EQ(cheap.next(), 8) << "everything kept: draft-max";
  EXPECT_GT(cheap.acceptance(), 0.95);
  // One unlucky pass of a good drafter: it keeps drafting, a little shorter at most.
  cheap.record(8, 0);
  EXPECT_GE(cheap.next(), 4);
  DraftLength half(8, 0, 0.25);
  for (int i = 0; i < 30; ++i) half.record(4, 2);
  EXPECT_NEAR(half.acceptance(), 2.0 / 3.0, 0.02);
  EXPECT_GE(half.next(), 1);
  EXPECT_LE(half.next(), 3) << "two of four kept: short drafts";
  // A costly drafter that the target disagrees with goes off, then tries one token; failing
  // again keeps it off longer.
  DraftLength costly(8, 0, 0.6);
  int passes = 0;
  while (costly.next() > 0 && passes < 100) costly.record(costly.next(), 0), ++passes;
  ASSERT_EQ(costly.next(), 0) << "never went off";
  auto off_period = [&] {
    int off = 0;
    while (costly.next() == 0 && off < 1000) costly.record(0, 0), ++off;
    return off;
  };
  const int off = off_period();
  EXPECT_GT(off, 0);
  EXPECT_EQ(costly.next(), 1);
  costly.record(1, 0);
  EXPECT_GT(off_period(), off);
  // A lookup drafter (no cost) that keeps its drafts grows to the most; draft-min is a floor.
  DraftLength lookup(6, 0, 0);
  for (int i = 0; i < 10; ++i) lookup.record(lookup.next(), lookup.next());
  EXPECT_EQ(lookup.next(), 6);
  EXPECT_EQ(DraftLength(1, 0).next(), 1);
  EXPECT_EQ(DraftLength(8, 5, 0.9).next(), 5);
}

}  // namespace
}  // namespace autoglm
