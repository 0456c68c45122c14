// Sampling, stop strings and single-sequence generation.
#include <gtest/gtest.h>

#include <cmath>

#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "engine/generator.h"
#include "engine/stop_matcher.h"
#include "sample/sampler.h"
#include "test_util.h"

namespace autoglm {
namespace {

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}

GenerationRequest with_prompt(GenerationRequest r, std::vector<int32_t> prompt) {
  r.prompt = std::move(prompt);
  return r;
}

TEST(Sampler, GreedyTakesArgmaxLowestIdOnTies) {
  Sampler s(greedy());
  std::vector<float> logits = {0.1f, 3.0f, 3.0f, -1.0f};
  EXPECT_EQ(s.sample(logits.data(), 4, {}), 1);
}

TEST(Sampler, LogitBiasBansAndForces) {
  SamplingParams p = greedy();
  p.logit_bias = {{1, -100.0f}};  // the argmax, banned
  std::vector<float> logits = {0.1f, 3.0f, 2.0f, -1.0f};
  EXPECT_EQ(Sampler(p).sample(logits.data(), 4, {}), 2);
  EXPECT_TRUE(std::isinf(logits[1]) && logits[1] < 0);
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0;
  p.logit_bias = {{3, 100.0f}, {7, 5.0f}};  // forced; an id past the row is ignored
  for (uint64_t seed = 0; seed < 20; ++seed) {
    p.seed = seed;
    std::vector<float> row = {0.1f, 3.0f, 2.0f, -1.0f};
    EXPECT_EQ(Sampler(p).sample(row.data(), 4, {}), 3) << "seed " << seed;
  }
  p.logit_bias = {{2, 100.5f}};
  EXPECT_FALSE(validate_sampling_params(p).is_ok());
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_FALSE(validate_sampling_params(p).is_ok());
}

// The tokens top-k, top-p and min-p keep, by a full sort (what the sampler avoids doing),
// with their probabilities after temperature.
std::map<int32_t, double> reference_kept(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  if (p.top_k > 0 && size_t(p.top_k) < order.size()) order.resize(size_t(p.top_k));
  const double max = logits[size_t(order[0])];
  double mass = 0;
  for (int32_t t : order) mass += std::exp(logits[size_t(t)] - max);
  size_t keep = order.size();
  if (p.top_p < 1) {
    double cum = 0;
    for (size_t i = 0; i < order.size(); ++i)
      if ((cum += std::exp(logits[size_t(order[i])] - max)) >= p.top_p * mass) {
        keep = i + 1;
        break;
      }
  }
  std::map<int32_t, double> kept;
  double total = 0;
  for (size_t i = 0; i < keep; ++i) {
    const double l = logits[size_t(order[i])];
    if (p.min_p > 0 && l < max + std::log(p.min_p)) break;
    total += kept[order[i]] = std::exp((l - max) / p.temperature);
  }
  for (auto& [t, w] : kept) w /= total;
  return kept;
}

// Without a full sort the sampler keeps exactly the tokens a full sort keeps, and draws them
// in proportion; masked tokens (-inf, more of them than top-k) are never drawn. Top-p over every
// token draws from all of them and keeps a draw inside the nucleus: with ties at its edge (the
// lower ids inside), and at a high temperature with a small top-p, where most draws miss and the
// nucleus is found instead.
TEST(Sampler, KeepsWhatAFullSortKeepsAndDrawsInProportion) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 2);
  struct Chain {
    float temperature, top_p, min_p;
    int32_t top_k;
    bool ties = false;  // logits in steps of 1/2: top-k's cut falls inside a tie (the lower ids stay)
  };
  for (const Chain& c :
       {Chain{1.0f, 0.5f, 0, 0}, Chain{0.7f, 0.9f, 0, 0}, Chain{1.3f, 1.0f, 0.05f, 0}, Chain{1.0f, 0.8f, 0.01f, 50},
        Chain{1.0f, 1.0f, 0, 0}, Chain{1.0f, 1.0f, 0, 40, true}, Chain{0.8f, 0.9f, 0, 7, true},
        Chain{1.0f, 1.0f, 0, 2500}, Chain{1.0f, 0.7f, 0, 0, true}, Chain{2.5f, 0.1f, 0, 0}}) {
    std::vector<float> logits(3000);
    for (float& l : logits) l = c.ties ? std::round(2 * normal(rng)) / 2 : normal(rng);
    for (size_t i = 0; i < logits.size(); i += 3) logits[i] = -INFINITY;  // a grammar's mask
    SamplingParams p;
    p.temperature = c.temperature;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.top_k = c.top_k;
    p.seed = 9;
    const auto kept = reference_kept(logits, p);
    Sampler s(p);
    std::map<int32_t, int> seen;
    const int draws = 20000;
    for (int d = 0; d < draws; ++d) {
      std::vector<float> row = logits;
      const int32_t t = s.sample(row.data(), int32_t(row.size()), {});
      ASSERT_TRUE(kept.count(t)) << "token " << t << " is not kept (top_p " << c.top_p << ")";
      ++seen[t];
    }
    // The most likely tokens come up in proportion (within 5 standard deviations).
    for (const auto& [t, prob] : kept) {
      if (prob < 0.01) continue;
      const double sd = std::sqrt(draws * prob * (1 - prob));
      EXPECT_NEAR(seen[t], draws * prob, 5 * sd) << "token " << t << " top_p " << c.top_p;
    }
  }
}

// The tokens that `draws` draws at temperature 1 with top-k alone (top-p 1) come up, with their counts.
std::map<int32_t, int> top_k_draws(const std::vector<float>& logits, int32_t top_k, int draws) {
  SamplingParams p;
  p.temperature = 1;
  p.top_p = 1;
  p.top_k = top_k;
  p.seed = 3;
  Sampler s(p);
  std::map<int32_t, int> seen;
  for (int d = 0; d < draws; ++d) {
    std::vector<float> row = logits;  // sample() may change its row
    ++seen[s.sample(row.data(), int32_t(row.size()), {})];
  }
  return seen;
}

std::vector<int32_t> tokens_of(const std::map<int32_t, int>& seen) {
  std::vector<int32_t> tokens;
  for (const auto& [t, count] : seen) tokens.push_back(t);
  return tokens;
}

// Top-k's cut inside a tie keeps the lower ids, whatever order the tied tokens come in; a tie
// evicted from the heap too (of three 2s behind a 3, the first one stays).
TEST(Sampler, TopKKeepsTheLowerIdsOfATie) {
  EXPECT_EQ(tokens_of(top_k_draws({1, 3, 3, 2, 2, 2, 0, 2}, 4, 2000)), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(tokens_of(top_k_draws({2, 2, 2, 3}, 2, 500)), (std::vector<int32_t>{0, 3}));
}

// A NaN logit is never a top-k candidate, wherever it stands.
TEST(Sampler, TopKPassesOverNaN) {
  EXPECT_EQ(tokens_of(top_k_draws({NAN, 5, 1, 6, NAN}, 2, 500)), (std::vector<int32_t>{1, 3}));
}

TEST(Sampler, RepetitionPenaltyChangesTheWinner) {
  SamplingParams p = greedy();
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  EXPECT_EQ(s.sample(logits.data(), 3, {0}), 1);  // 2.0 / 2 < 1.5
  EXPECT_FLOAT_EQ(logits[0], 1.0f);
}

TEST(Sampler, FrequencyAndPresencePenalties) {
  SamplingParams p = greedy();
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s(p);
  std::vector<float> logits = {3.0f, 2.0f};
  s.sample(logits.data(), 2, {0, 0, 1});
  EXPECT_FLOAT_EQ(logits[0], 3.0f - 1.0f - 0.25f);
  EXPECT_FLOAT_EQ(logits[1], 2.0f - 0.5f - 0.25f);
}

TEST(Sampler, PenaltyWindowOnlyLooksBack) {
  SamplingParams p = greedy();
  p.presence_penalty = 1.0f;
  p.penalty_last_n = 1;
  Sampler s(p);
  std::vector<float> logits = {1.0f, 1.0f};
  s.sample(logits.data(), 2, {0, 1});
  EXPECT_FLOAT_EQ(logits[0], 1.0f);  // outside the window
  EXPECT_FLOAT_EQ(logits[1], 0.0f);
}

std::map<int32_t, int> histogram(SamplingParams p, const std::vector<float>& logits, int draws) {
  std::map<int32_t, int> counts;
  p.seed = 42;
  Sampler s(p);
  for (int i = 0; i < draws; ++i) {
    auto l = logits;
    ++counts[s.sample(l.data(), int32_t(l.size()), {})];
  }
  return counts;
}

TEST(Sampler, TopKTopPMinPRestrictTheCandidates) {
  const std::vector<float> logits = {2.0f, 1.9f, 1.8f, 0.0f, -5.0f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.top_k = 2;
  auto h = histogram(p, logits, 2000);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_TRUE(h.count(0) && h.count(1));

  p.top_k = 0;
  p.top_p = 0.5f;  // token 0 alone holds ~0.36, tokens 0+1 ~0.69
  h = histogram(p, logits, 2000);
  EXPECT_EQ(h.size(), 2u);

  p.top_p = 1.0f;
  p.min_p = 0.5f;  // exp(-2) of the best is below half: token 3 and 4 go
  h = histogram(p, logits, 2000);
  EXPECT_EQ(h.size(), 3u);
  EXPECT_FALSE(h.count(3));
}

TEST(Sampler, TemperatureFlattensTheDistribution) {
  const std::vector<float> logits = {1.0f, 0.0f};
  SamplingParams p;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.temperature = 0.25f;
  const int cold = histogram(p, logits, 4000)[1];
  p.temperature = 4.0f;
  const int hot = histogram(p, logits, 4000)[1];
  EXPECT_LT(cold, 150);  // p(1) = 1/(1+e^4) ~ 0.018
  EXPECT_GT(hot, 1500);  // p(1) = 1/(1+e^0.25) ~ 0.44
}

TEST(Sampler, SameSeedSameDraws) {
  const std::vector<float> logits = {0.5f, 0.4f, 0.3f, 0.2f, 0.1f};
  SamplingParams p;
  p.top_k = 0;
  p.min_p = 0;
  EXPECT_EQ(histogram(p, logits, 500), histogram(p, logits, 500));
}

TEST(Sampler, ValidationNamesTheParameter) {
  SamplingParams p;
  p.top_p = 1.5f;
  EXPECT_NE(validate_sampling_params(p).message().find("top_p"), std::string::npos);
  p = SamplingParams();
  p.temperature = -1;
  EXPECT_NE(validate_sampling_params(p).message().find("temperature"), std::string::npos);
  EXPECT_TRUE(validate_sampling_params(SamplingParams()).is_ok());
}

TEST(StopMatcher, HoldsBackPossibleStopPrefix) {
  StopMatcher m({"END", "\n\n"});
  EXPECT_EQ(m.push("hello E"), "hello ");
  EXPECT_EQ(m.push("N"), "");
  EXPECT_EQ(m.push("x"), "ENx");
  EXPECT_EQ(m.push(" then EN"), " then ");
  EXPECT_EQ(m.push("D and more"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, FlushReleasesHeldText) {
  StopMatcher m({"stop"});
  EXPECT_EQ(m.push("a st"), "a ");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.flush(), "st");
}

struct Stories : public ::testing::Test {
  void SetUp() override {
    AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
    auto m = Model::load(test::shared_path("models/stories260K.gguf"));
    ASSERT_TRUE(m.is_ok());
    model = std::move(m).value();
    auto t = Tokenizer::from_gguf(model->file());
    ASSERT_TRUE(t.is_ok());
    tok = std::move(t).value();
  }
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
  ThreadPool pool{2};
};

TEST_F(Stories, GreedyGenerationIsTheReferenceText) {
  const auto c = nlohmann::json::parse(test::read_file(test::shared_path("golden/stories260k-once/case.json")));
  Generator gen(*model, *tok, pool, 256);
  GenerationRequest o;
  o.max_tokens = 64;
  o.sampling = greedy();
  std::string streamed;
  auto r = gen.generate(
      with_prompt(o, tok->encode("Once upon a time", true)),
      [&](const std::string& t) {
        streamed += t;
        return true;
      },
      /*prefill_chunk=*/2);  // chunked prefill gives the same result
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->text, c["greedy"]["output_text"].get<std::string>());
  EXPECT_EQ(streamed, r->text);
  EXPECT_EQ(r->finish_reason, FinishReason::kLength);
  EXPECT_EQ(r->tokens.size(), 64u);
  EXPECT_EQ(r->prompt_tokens, 5);
}

TEST_F(Stories, StopStringEndsGenerationAndIsNotShown) {
  Generator gen(*model, *tok, pool, 256);
  GenerationRequest o;
  o.max_tokens = 64;
  o.sampling = greedy();
  o.stop = {"Lily"};
  auto r = gen.generate(with_prompt(o, tok->encode("Once upon a time", true)));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->text, ", there was a little girl named ");
  EXPECT_EQ(r->finish_reason, FinishReason::kStop);
}

TEST_F(Stories, SeededSamplingIsReproducible) {
  Generator gen(*model, *tok, pool, 256);
  GenerationRequest o;
  o.max_tokens = 32;
  o.sampling.temperature = 1.0f;
  o.sampling.seed = 1234;
  const auto prompt = tok->encode("Lily", true);
  o.prompt = prompt;
  auto a = gen.generate(o), b = gen.generate(o);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->tokens, b->tokens);
  o.sampling.seed = 99;
  auto c = gen.generate(o);
  EXPECT_NE(a->tokens, c->tokens);
}

TEST_F(Stories, EndOfGenerationTokenEndsGeneration) {
  // Declare the second token of the greedy continuation (" there", 383) the EOS.
  Vocab v = tok->vocab();
  v.eos = 383;
  Tokenizer eos_tok(v, TextPipeline{});
  Generator gen(*model, eos_tok, pool, 256);
  GenerationRequest o;
  o.max_tokens = 64;
  o.sampling = greedy();
  auto r = gen.generate(with_prompt(o, tok->encode("Once upon a time", true)));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->finish_reason, FinishReason::kStop);
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{432, 383}));
  EXPECT_EQ(r->text, ",");
  o.ignore_eos = true;
  r = gen.generate(with_prompt(o, tok->encode("Once upon a time", true)));
  EXPECT_EQ(r->tokens.size(), 64u);
}

TEST_F(Stories, FullContextEndsAsLength) {
  Generator gen(*model, *tok, pool, 16);
  GenerationRequest o;
  o.max_tokens = 100;
  o.sampling = greedy();
  auto r = gen.generate(with_prompt(o, tok->encode("Once upon a time", true)));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->finish_reason, FinishReason::kLength);
  EXPECT_EQ(r->tokens.size(), 12u);  // positions 5..15 decoded, the 12th token sampled from the last
}

TEST_F(Stories, PromptLongerThanContextIsAnError) {
  Generator gen(*model, *tok, pool, 8);
  GenerationRequest eight;
  eight.prompt = std::vector<int32_t>(8, 1);
  auto r = gen.generate(eight);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("does not fit the context"), std::string::npos);
}

}  // namespace
}  // namespace autoglm
