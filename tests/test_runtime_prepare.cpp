// The public API the server goes through: a Request prepared (prompt rendered, max_tokens
// fitted, limits checked, errors naming their field), submitted once per choice, its output
// key; compiled constraints; the cache salt; streams the caller fills; stats, embed and the
// steps hold.
#include <gtest/gtest.h>

#include <cmath>

#include "autoglm/runtime.h"
#include "runtime_test_util.h"
#include "test_util.h"

namespace autoglm {
namespace {

class RuntimePrepare : public test::StoriesRuntime {
 protected:
  RuntimeOptions options() const override {
    RuntimeOptions o = StoriesRuntime::options();
    o.context_window = 256;
    o.limits.stop_strings = 2;
    return o;
  }
  std::string whole_text(const PreparedRequest& p, int32_t choice = 0) {
    auto handle = rt->submit(p, choice);
    EXPECT_TRUE(handle.is_ok()) << handle.status().message();
    if (!handle) return "";
    std::string out;
    StreamEvent ev;
    while ((*handle)->next(ev)) {
      out += ev.text;
      if (ev.finished) break;
    }
    return out;
  }
};

TEST_F(RuntimePrepare, APreparedRequestIsTheSubmittedOne) {
  auto prepared = rt->prepare(greedy("Once upon a time", 16));
  ASSERT_TRUE(prepared.is_ok()) << prepared.status().message();
  EXPECT_EQ(prepared->prompt(), rt->prompt_tokens("Once upon a time"));
  EXPECT_EQ(prepared->max_tokens(), 16);
  EXPECT_TRUE(prepared->deterministic());
  EXPECT_FALSE(prepared->reads_tool_calls());
  auto direct = rt->generate_text(greedy("Once upon a time", 16));
  ASSERT_TRUE(direct.is_ok());
  EXPECT_EQ(whole_text(*prepared), *direct);
  EXPECT_EQ(whole_text(*prepared), *direct) << "a prepared request submits again, the same";
}

TEST_F(RuntimePrepare, MaxTokensIsFittedToTheRoomTheContextLeaves) {
  auto unbounded = rt->prepare(greedy("Once upon a time", -1));
  ASSERT_TRUE(unbounded.is_ok()) << unbounded.status().message();
  EXPECT_EQ(unbounded->max_tokens(), 256 - int32_t(unbounded->prompt().size()));
  auto over = rt->prepare(greedy("Once upon a time", 100000));
  ASSERT_TRUE(over.is_ok()) << over.status().message();
  EXPECT_EQ(over->max_tokens(), unbounded->max_tokens());
}

TEST_F(RuntimePrepare, TheRequestLimitsAreChecked) {
  Request r = greedy("Once upon a time", 8);
  r.stop = {"a", "b", "c"};
  auto over = rt->prepare(r);
  ASSERT_FALSE(over.is_ok()) << "three stop strings past limits.stop_strings = 2";
  EXPECT_EQ(over.status().field(), "stop");
  r.stop.pop_back();
  EXPECT_TRUE(rt->prepare(r).is_ok());
}

TEST_F(RuntimePrepare, TheOutputKeySaysWhatDecidesTheOutput) {
  auto key = [&](Request r) {
    auto p = rt->prepare(r);
    EXPECT_TRUE(p.is_ok()) << p.status().message();
    return p ? p->output_key() : std::string();
  };
  const Request base = greedy("Once upon a time", 16);
  EXPECT_EQ(key(base), key(base));
  Request other = base;
  other.max_tokens = 17;
  EXPECT_NE(key(base), key(other));
  other = base;
  other.cache_salt = "tenant-a";
  EXPECT_NE(key(base), key(other)) << "the prefix-cache scope is part of it";
  other = base;
  other.stop = {"."};
  EXPECT_NE(key(base), key(other));
  other = base;
  other.constraint = {ConstraintKind::kGbnf, "root ::= [a-z ]+", "grammar"};
  EXPECT_NE(key(base), key(other));
  other = base;
  other.sampling.temperature = 0.7f;
  auto sampled = rt->prepare(other);
  ASSERT_TRUE(sampled.is_ok());
  EXPECT_FALSE(sampled->deterministic());
  other.sampling.seed = 7;
  sampled = rt->prepare(other);
  ASSERT_TRUE(sampled.is_ok());
  EXPECT_TRUE(sampled->deterministic());
}

TEST_F(RuntimePrepare, AnotherChoiceOfASeededRequestHasItsOwnSeed) {
  Request r = greedy("Once upon a time", 24);
  r.sampling.temperature = 1.0f;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1.0f;
  r.sampling.min_p = 0;
  r.sampling.seed = 11;
  auto prepared = rt->prepare(r);
  ASSERT_TRUE(prepared.is_ok());
  const std::string first = whole_text(*prepared, 0);
  EXPECT_EQ(whole_text(*prepared, 0), first) << "the same choice: the same seed";
  Request seeded = r;
  seeded.sampling.seed = 12;
  auto next_seed = rt->prepare(seeded);
  ASSERT_TRUE(next_seed.is_ok());
  EXPECT_EQ(whole_text(*prepared, 1), whole_text(*next_seed, 0)) << "choice 1 runs with seed + 1";
}

TEST_F(RuntimePrepare, ErrorsNameTheirField) {
  Conversation not_a_list;
  not_a_list.messages_json = "{\"not\": \"a list\"}";
  Request chat;
  chat.chat = not_a_list;
  auto bad_messages = rt->prepare(chat);
  ASSERT_FALSE(bad_messages.is_ok());
  EXPECT_EQ(bad_messages.status().field(), "messages");

  Conversation weather;
  weather.messages = {{"user", "weather?"}};
  weather.tools_json =
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])";
  weather.tool_choice = ToolChoice::kNamed;
  weather.tool_name = "no_such_tool";
  Request forced;
  forced.chat = weather;
  auto bad_tool = rt->prepare(forced);
  ASSERT_FALSE(bad_tool.is_ok());
  EXPECT_EQ(bad_tool.status().field(), "tool_choice") << bad_tool.status().message();
  forced.chat->tool_name = "get_weather";
  auto named = rt->prepare(forced);
  ASSERT_TRUE(named.is_ok()) << named.status().message();
  EXPECT_TRUE(named->reads_tool_calls());

  Request biased = greedy("Once", 4);
  biased.sampling.logit_bias = {{1 << 20, 5.0f}};
  auto bad_bias = rt->prepare(biased);
  ASSERT_FALSE(bad_bias.is_ok());
  EXPECT_EQ(bad_bias.status().field(), "logit_bias.1048576");

  Request long_prompt = greedy(std::string(4000, 'a'), 4);
  auto too_long = rt->prepare(long_prompt);
  ASSERT_FALSE(too_long.is_ok());
  EXPECT_EQ(too_long.status().field(), "prompt");

  Request named_lora = greedy("Once", 4);
  named_lora.lora = "nobody";
  auto no_lora = rt->prepare(named_lora);
  ASSERT_FALSE(no_lora.is_ok());
  EXPECT_EQ(no_lora.status().field(), "lora");
}

TEST_F(RuntimePrepare, ARequestPreparedByAnotherRuntimeIsRefused) {
  RuntimeOptions o;
  o.threads = 2;
  o.kv_memory_mib = 16;
  auto other = Runtime::open_beside(*rt, test::shared_path("models/stories260K.gguf"), o);
  ASSERT_TRUE(other.is_ok()) << other.status().message();
  auto prepared = (*other)->prepare(greedy("Once", 4));
  ASSERT_TRUE(prepared.is_ok());
  auto handle = rt->submit(*prepared);
  ASSERT_FALSE(handle.is_ok());
  EXPECT_NE(handle.status().message().find("another runtime"), std::string::npos);
}

TEST(Constraints, CompiledOnceErrorsNameTheSource) {
  OutputConstraint schema{ConstraintKind::kJsonSchema,
                          R"({"type": "object", "properties": {"a": {"type": "integer"}}})", "response_format"};
  ASSERT_TRUE(compile_constraint(schema).is_ok());
  ASSERT_NE(schema.compiled, nullptr);
  const auto compiled = schema.compiled;
  ASSERT_TRUE(compile_constraint(schema).is_ok());
  EXPECT_EQ(schema.compiled, compiled) << "a compiled constraint is not compiled again";

  OutputConstraint any_object{ConstraintKind::kJsonObject, "", "response_format"};
  EXPECT_TRUE(compile_constraint(any_object).is_ok());
  EXPECT_NE(any_object.compiled, nullptr);

  OutputConstraint broken{ConstraintKind::kGbnf, "root ::= (", "grammar"};
  const Status st = compile_constraint(broken);
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.field(), "grammar");
  EXPECT_EQ(broken.compiled, nullptr);
  OutputConstraint not_json{ConstraintKind::kJsonSchema, "{", "response_format.json_schema.schema"};
  EXPECT_EQ(compile_constraint(not_json).field(), "response_format.json_schema.schema");
}

TEST(Streams, ARecordedStreamReplaysAndARelayCarriesWhatIsAppended) {
  StreamEvent a, b;
  a.text = "one ";
  b.text = "two";
  b.finished = true;
  b.finish_reason = FinishReason::kStop;
  auto recorded = StreamHandle::recorded({a, b});
  StreamEvent ev;
  ASSERT_TRUE(recorded->try_next(ev));
  EXPECT_EQ(ev.text, "one ");
  ASSERT_TRUE(recorded->try_next(ev));
  EXPECT_TRUE(ev.finished);
  EXPECT_FALSE(recorded->try_next(ev));

  auto [relay, append] = StreamHandle::relay();
  EXPECT_FALSE(relay->try_next(ev));
  append(a);
  ASSERT_TRUE(relay->try_next(ev));
  EXPECT_EQ(ev.text, "one ");
  relay.reset();
  append(b);  // no reader left: dropped, nothing breaks
}

TEST_F(RuntimePrepare, StatsCountWhatRan) {
  ASSERT_TRUE(rt->generate_text(greedy("Once upon a time", 8)).is_ok());
  const RuntimeStats s = rt->stats();
  EXPECT_TRUE(s.loop_alive);
  EXPECT_GT(s.prompt_tokens, 0);
  EXPECT_EQ(s.generated_tokens, 8);
  ASSERT_EQ(s.finished.size(), size_t(kFinishReasonCount));
  EXPECT_EQ(s.finished[size_t(FinishReason::kLength)], 1);
  EXPECT_EQ(s.prefill_chunks.size(), size_t(8));
  EXPECT_EQ(s.spec_acceptance.size(), size_t(10));
  EXPECT_TRUE(s.op_seconds.empty()) << "profiling is off";
}

TEST_F(RuntimePrepare, EmbeddingsAreUnitLengthAndTruncatedOnRequest) {
  const std::vector<int32_t> ids = rt->prompt_tokens("Once upon a time");
  auto full = rt->embed({ids});
  ASSERT_TRUE(full.is_ok()) << full.status().message();
  ASSERT_EQ(full->size(), size_t(1));
  EXPECT_EQ(int64_t((*full)[0].size()), int64_t(rt->info().n_embd));
  auto cut = rt->embed({ids}, Pooling::kLast, 16);
  ASSERT_TRUE(cut.is_ok());
  ASSERT_EQ((*cut)[0].size(), size_t(16));
  double norm = 0;
  for (float x : (*cut)[0]) norm += double(x) * x;
  EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-5);
  auto bad = rt->embed({{}});
  EXPECT_FALSE(bad.is_ok());
}

// (That no step runs meanwhile is what the server tests' EngineHold relies on throughout.)
TEST_F(RuntimePrepare, ARequestSubmittedDuringAHoldFinishesOnceItIsDropped) {
  auto hold = rt->hold_steps();
  auto handle = rt->submit(greedy("Once upon a time", 4));
  ASSERT_TRUE(handle.is_ok());
  StreamEvent ev;
  hold.reset();
  std::string out;
  while ((*handle)->next(ev, std::chrono::seconds(120))) {
    out += ev.text;
    if (ev.finished) break;
  }
  EXPECT_TRUE(ev.finished) << "the request finished once the hold was dropped";
}

}  // namespace
}  // namespace autoglm
