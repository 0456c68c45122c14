// The thinking phase as the engine samples it: the budget forces the close marker, a
// constraint applies only to the answer, and a model that may still open its thinking can.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/thinking_gate.h"
#include "runtime_test_util.h"

namespace autoglm {
namespace {

ThinkingSpec spec(bool inside, int32_t budget, bool constraint_after) {
  ThinkingSpec s;
  s.open = {5, 6};
  s.close = {7, 8};
  s.starts_inside = inside;
  s.budget = budget;
  s.constraint_after = constraint_after;
  return s;
}

TEST(ThinkingGate, TheBudgetForcesTheCloseMarkerThenTheAnswerIsConstrained) {
  ThinkingGate g(spec(true, 2, true));
  EXPECT_TRUE(g.thinking());
  EXPECT_FALSE(g.constrained());
  EXPECT_FALSE(g.forced());
  g.accept(1, false);
  EXPECT_FALSE(g.forced());
  g.accept(2, false);
  ASSERT_TRUE(g.forced());
  EXPECT_EQ(*g.forced(), 7);
  g.accept(7, false);
  ASSERT_TRUE(g.forced());
  EXPECT_EQ(*g.forced(), 8);
  g.accept(8, false);
  EXPECT_FALSE(g.forced());
  EXPECT_FALSE(g.thinking());
  EXPECT_TRUE(g.constrained());
}

TEST(ThinkingGate, APartlyWrittenCloseMarkerIsFinishedNotRepeated) {
  ThinkingGate g(spec(true, 2, false));
  g.accept(1, false);
  g.accept(7, false);  // the model began the close itself as the budget ran out
  ASSERT_TRUE(g.forced());
  EXPECT_EQ(*g.forced(), 8);
  g.accept(8, false);
  EXPECT_FALSE(g.thinking());
}

TEST(ThinkingGate, AModelThatClosesItselfIsNotForced) {
  ThinkingGate g(spec(true, 10, false));
  g.accept(1, false);
  g.accept(7, false);
  g.accept(8, false);
  EXPECT_FALSE(g.thinking());
  for (int i = 0; i < 20; ++i) g.accept(3, false);
  EXPECT_FALSE(g.forced()) << "the budget counts only the thinking";
}

TEST(ThinkingGate, ZeroBudgetClosesAtOnce) {
  ThinkingGate g(spec(true, 0, false));
  ASSERT_TRUE(g.forced());
  EXPECT_EQ(*g.forced(), 7);
}

TEST(ThinkingGate, BeforeTheStartTheOpenMarkerIsAllowedBesidesTheConstraint) {
  ThinkingGate g(spec(false, -1, true));
  EXPECT_TRUE(g.constrained());
  EXPECT_EQ(g.also_allowed(), 5);
  g.accept(5, false);  // the model opens its thinking: the rest of the marker is forced
  ASSERT_TRUE(g.forced());
  EXPECT_EQ(*g.forced(), 6);
  g.accept(6, false);
  EXPECT_TRUE(g.thinking());
  EXPECT_FALSE(g.constrained());
  EXPECT_EQ(g.also_allowed(), -1);
}

TEST(ThinkingGate, AnAnswerThatStartsWithoutThinkingIsConstrainedThroughout) {
  ThinkingGate g(spec(false, 3, true));
  g.accept(9, true);  // blank: the thinking may still open
  EXPECT_EQ(g.also_allowed(), 5);
  g.accept(4, false);
  EXPECT_FALSE(g.thinking());
  EXPECT_EQ(g.also_allowed(), -1);
  EXPECT_TRUE(g.constrained());
  for (int i = 0; i < 5; ++i) g.accept(4, false);
  EXPECT_FALSE(g.forced());
}

TEST(ThinkingGate, APromptThatClosedTheThinkingStartsAtTheAnswer) {
  ThinkingSpec s = spec(false, 1, true);
  s.starts_closed = true;
  ThinkingGate g(s);
  EXPECT_EQ(g.also_allowed(), -1);
  EXPECT_TRUE(g.constrained());
}

TEST(ThinkingGate, NoSpecIsNoPhase) {
  ThinkingGate g(std::nullopt);
  EXPECT_TRUE(g.constrained());
  EXPECT_EQ(g.also_allowed(), -1);
  EXPECT_FALSE(g.forced());
}

// A template whose generation prompt opens the thinking (as DeepSeek-R1's and Qwen3's
// thinking-only models do), over stories260K.
class ThinkingRuntime : public test::StoriesRuntime {
 protected:
  RuntimeOptions options() const override {
    RuntimeOptions o = StoriesRuntime::options();
    const std::string path = ::testing::TempDir() + "/thinking_" + std::to_string(opens_thinking()) + ".jinja";
    std::ofstream(path) << "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
                           "{% if add_generation_prompt %}<|assistant|>"
                        << (opens_thinking() ? "<think>" : "{# the model may write <think> #}") << "{% endif %}";
    o.chat_template = path;
    return o;
  }
  virtual bool opens_thinking() const { return true; }
  Request chat(int32_t budget, int32_t max_tokens) const {
    Request r;
    Conversation c;
    c.messages_json = R"([{"role": "user", "content": "Once upon a time"}])";
    c.thinking_budget_tokens = budget;
    r.chat = c;
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0.9;
    r.sampling.seed = 7;
    return r;
  }
  struct Reply {
    std::vector<int32_t> tokens;
    std::string reasoning, answer;
  };
  Reply run(const Request& request) {
    Reply out;
    auto prepared = rt->prepare(request);
    EXPECT_TRUE(prepared.is_ok()) << prepared.status().message();
    if (!prepared.is_ok()) return out;
    auto handle = rt->submit(*prepared);
    EXPECT_TRUE(handle.is_ok()) << handle.status().message();
    if (!handle.is_ok()) return out;
    StreamEvent ev;
    while ((*handle)->next(ev, std::chrono::seconds(120))) {
      out.tokens.insert(out.tokens.end(), ev.tokens.begin(), ev.tokens.end());
      for (const OutputPart& p : ev.parts) {
        if (p.kind == PartKind::kReasoning) out.reasoning += p.text;
        if (p.kind == PartKind::kText) out.answer += p.text;
      }
      if (ev.finished) return out;
    }
    ADD_FAILURE() << "the request never finished";
    return out;
  }
};

TEST_F(ThinkingRuntime, TheBudgetEndsTheThinkingWithTheCloseMarker) {
  const std::vector<int32_t> close = rt->encode("</think>", false, true);
  ASSERT_FALSE(close.empty());
  const Reply r = run(chat(5, 24));
  ASSERT_GE(r.tokens.size(), 5 + close.size());
  EXPECT_EQ(std::vector<int32_t>(r.tokens.begin() + 5, r.tokens.begin() + 5 + long(close.size())), close)
      << "the close marker follows the fifth token of thinking";
  EXPECT_FALSE(r.reasoning.empty());
  EXPECT_EQ(r.reasoning.find("</think>"), std::string::npos);
}

TEST_F(ThinkingRuntime, AResponseFormatConstrainsOnlyTheAnswerAfterTheThinking) {
  Request req = chat(4, 200);
  req.constraint.kind = ConstraintKind::kJsonSchema;
  req.constraint.text = R"({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})";
  const Reply r = run(req);
  EXPECT_FALSE(r.reasoning.empty()) << "the thinking was not constrained away";
  const auto answer = nlohmann::json::parse(r.answer, nullptr, false);
  ASSERT_FALSE(answer.is_discarded()) << "the answer is not JSON: " << r.answer;
  EXPECT_TRUE(answer["ok"].is_boolean()) << r.answer;
}

TEST_F(ThinkingRuntime, AGrammarStillConstrainsTheWholeText) {
  Request req = chat(2, 64);
  req.constraint.kind = ConstraintKind::kGbnf;
  req.constraint.text = R"(root ::= "<think>x</think>done")";
  const Reply r = run(req);
  EXPECT_EQ(r.reasoning, "x") << "a grammar is the whole text, the budget unused";
  EXPECT_EQ(r.answer, "done");
}

// A template that leaves opening the thinking to the model (as GLM-4.5's and Qwen3's do).
class ThinkingOptionalRuntime : public ThinkingRuntime {
 protected:
  bool opens_thinking() const override { return false; }
};

TEST_F(ThinkingOptionalRuntime, AConstrainedModelMayStillOpenItsThinking) {
  const std::vector<int32_t> open = rt->encode("<think>", false, true);
  ASSERT_FALSE(open.empty());
  Request req = chat(3, 200);
  req.constraint.kind = ConstraintKind::kJsonSchema;
  req.constraint.text = R"({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})";
  req.sampling.logit_bias = {{open[0], 100.0f}};  // the model wants to think: the JSON grammar alone would refuse it
  const Reply r = run(req);
  ASSERT_GE(r.tokens.size(), open.size());
  EXPECT_EQ(std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + long(open.size())), open)
      << "the open marker's first token was allowed and the rest forced";
  EXPECT_FALSE(r.reasoning.empty());
  const auto answer = nlohmann::json::parse(r.answer, nullptr, false);
  ASSERT_FALSE(answer.is_discarded()) << "the answer is not JSON: " << r.answer;
  EXPECT_TRUE(answer["ok"].is_boolean()) << r.answer;
}

TEST_F(ThinkingOptionalRuntime, AnAnswerWithoutThinkingIsConstrainedFromItsFirstToken) {
  const std::vector<int32_t> open = rt->encode("<think>", false, true);
  ASSERT_FALSE(open.empty());
  Request req = chat(3, 200);
  req.sampling.logit_bias = {{open[0], -100.0f}};  // this time the model does not think
  req.constraint.kind = ConstraintKind::kJsonSchema;
  req.constraint.text = R"({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})";
  const Reply r = run(req);
  EXPECT_TRUE(r.reasoning.empty()) << r.reasoning;
  const auto answer = nlohmann::json::parse(r.answer, nullptr, false);
  ASSERT_FALSE(answer.is_discarded()) << "the answer is not JSON: " << r.answer;
}

}  // namespace
}  // namespace autoglm
