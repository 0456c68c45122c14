// Constrained output that runs out of tokens: on a byte-level BPE vocabulary (qwen2-tiny) and
// a SentencePiece one (stories260K), sampling at temperature 1, every max_tokens from the
// shortest completion (counted in the vocabulary's own tokens) upward ends in a whole sentence
// of the grammar with finish "stop": a JSON Schema reply, any JSON object, a forced tool call.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"
#include "engine/constrained.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "model/model.h"
#include "sample/json_schema.h"
#include "test_util.h"

namespace autoglm {
namespace {

using nlohmann::json;

const json kSchema = json::parse(R"({"type": "object", "properties": {"city": {"type": "string"},
    "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]})");

const json kTools =
    json::array({{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", kSchema}}}}});

// Arguments valid for kSchema: both keys, nothing else.
void expect_weather(const json& j, const std::string& text) {
  ASSERT_TRUE(j.is_object()) << text;
  EXPECT_EQ(j.size(), 2u) << text;
  EXPECT_TRUE(j.contains("city") && j["city"].is_string()) << text;
  ASSERT_TRUE(j.contains("unit") && j["unit"].is_string()) << text;
  EXPECT_TRUE(j["unit"] == "celsius" || j["unit"] == "fahrenheit") << text;
}

void expect_schema_reply(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << "not JSON: " << text;
  expect_weather(j, text);
}

void expect_object(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "not JSON: " << text;
  EXPECT_TRUE(j.is_object()) << text;
}

void expect_tool_call(const std::string& text) {
  ToolCallParser parser(ToolCallFamily::kHermes, {"get_weather"}, "call_");
  ToolCallParser::Output out = parser.push(text);
  const ToolCallParser::Output rest = parser.finish();
  out.calls.insert(out.calls.end(), rest.calls.begin(), rest.calls.end());
  EXPECT_EQ(out.content + rest.content, "") << text;
  ASSERT_EQ(out.calls.size(), 1u) << "not one whole call: " << text;
  EXPECT_EQ(out.calls[0].name, "get_weather");
  const json args = json::parse(out.calls[0].arguments, nullptr, false);
  ASSERT_FALSE(args.is_discarded()) << text;
  expect_weather(args, text);
}

// A request's grammar, with a shortest sentence of it and what a whole reply must be.
struct Case {
  const char* what;
  std::string gbnf;
  std::string shortest_text;
  std::function<void(const std::string&)> check;
};

std::vector<Case> cases() {
  return {
      {"response_format json_schema", *json_schema_to_gbnf(kSchema), R"({"city":"","unit":"celsius"})",
       expect_schema_reply},
      {"response_format json_object", json_object_gbnf(), "{}", expect_object},
      {"tool_choice naming the function", *tool_call_grammar(ToolCallFamily::kHermes, kTools, "get_weather"),
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"\",\"unit\":\"celsius\"}}\n</tool_call>",
       expect_tool_call},
  };
}

constexpr int kSeeds = 3;
constexpr int kAboveShortest = 5;  // budgets shortest .. shortest + this

class Budget : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    AUTOGLM_REQUIRE_SHARED(GetParam());
    auto m = Model::load(test::shared_path(GetParam()));
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    model = std::move(m).value();
    auto t = model->load_tokenizer();
    ASSERT_TRUE(t.is_ok()) << t.status().message();
    tok = std::move(t).value();
    prompt = tok->encode("The weather in", true);
  }

  // The engine's count from the start of `c`'s grammar, checked against the tokenizer's own
  // spelling of a shortest sentence (one way to write it, plus the end token).
  int64_t shortest(const Case& c, const std::shared_ptr<const Grammar>& grammar) {
    VocabularyTrie trie(*tok);
    EXPECT_TRUE(trie.get()->spells_every_byte());
    auto matcher = trie.make_matcher(grammar);
    const int64_t n = matcher->shortest_completion();
    EXPECT_GT(n, 1) << c.what;
    EXPECT_LE(n, int64_t(tok->encode(c.shortest_text, false).size()) + 1) << c.what;
    return n;
  }

  GenerationRequest request(const std::shared_ptr<const Grammar>& grammar, int64_t max_tokens, int seed) const {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = int32_t(max_tokens);
    r.sampling.temperature = 1.0f;  // the whole distribution: every admissible token can come
    r.sampling.top_k = 0;
    r.sampling.top_p = 1.0f;
    r.sampling.min_p = 0.0f;
    r.sampling.seed = uint64_t(seed);
    r.grammar = grammar;
    return r;
  }

  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
  std::vector<int32_t> prompt;
  ThreadPool pool{2};
};

TEST_P(Budget, EveryBudgetFromTheShortestEndsInAWholeSentence) {
  Generator gen(*model, *tok, pool, 512);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.what);
    auto grammar = Grammar::parse(c.gbnf);
    ASSERT_TRUE(grammar.is_ok()) << grammar.status().message();
    const int64_t n = shortest(c, *grammar);
    for (int64_t max_tokens = n; max_tokens <= n + kAboveShortest; ++max_tokens)
      for (int seed = 1; seed <= kSeeds; ++seed) {
        auto out = gen.generate(request(*grammar, max_tokens, seed));
        ASSERT_TRUE(out.is_ok()) << out.status().message();
        EXPECT_EQ(out->finish_reason, FinishReason::kStop)
            << "max_tokens " << max_tokens << " (shortest " << n << "), seed " << seed << ": " << out->text;
        EXPECT_LE(int64_t(out->tokens.size()), max_tokens);
        c.check(out->text);
      }
  }
}

// The serving engine, requests batched together, applies the same rule.
TEST_P(Budget, TheServingEngineEndsForcedCallsInTime) {
  EngineConfig cfg;
  cfg.kv_blocks = 256;
  cfg.max_running = 16;
  Engine engine(*model, *tok, pool, cfg);
  const Case c = cases()[2];
  auto grammar = Grammar::parse(c.gbnf);
  ASSERT_TRUE(grammar.is_ok()) << grammar.status().message();
  const int64_t n = shortest(c, *grammar);
  std::vector<std::shared_ptr<StreamHandle>> handles;
  for (int64_t max_tokens = n; max_tokens <= n + kAboveShortest; ++max_tokens)
    for (int seed = 1; seed <= kSeeds; ++seed) {
      auto h = engine.submit(request(*grammar, max_tokens, seed));
      ASSERT_TRUE(h.is_ok()) << h.status().message();
      handles.push_back(*h);
    }
  for (const auto& h : handles) {
    std::string text;
    StreamEvent ev;
    while (h->next(ev, std::chrono::seconds(60))) {
      text += ev.text;
      if (ev.finished) break;
    }
    ASSERT_TRUE(ev.finished);
    EXPECT_EQ(ev.finish_reason, FinishReason::kStop) << text;
    c.check(text);
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, Budget, ::testing::Values("models/hf/qwen2-tiny", "models/stories260K.gguf"),
                         [](const auto& info) { return std::string(info.index == 0 ? "BytePairs" : "SentencePiece"); });

}  // namespace
}  // namespace autoglm
