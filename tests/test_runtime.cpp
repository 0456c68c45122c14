// The public Runtime API on the bundled tiny model: open errors, one prompt source per
// request, greedy text equal to the reference, chat rendering, constraints given as text,
// one-pass logits, stats, and a runtime without an engine.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "autoglm/runtime.h"
#include "runtime_test_util.h"
#include "test_util.h"

namespace autoglm {
namespace {

class RuntimeApi : public test::StoriesRuntime {};

// This process's resident memory (/proc/self/statm's second field, in pages).
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * 4096;
}

// A KV pool costs no memory until its blocks are used: zeroing a GiB by hand held a server's
// readiness back by a second. Its pages still read as zero: the text is the reference.
TEST(RuntimeOpen, AKvPoolIsNotTouchedAtOpen) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  RuntimeOptions o;
  o.threads = 2;
  o.kv_memory_mib = 1024;
  const int64_t before = resident_bytes();
  auto rt = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
  ASSERT_TRUE(rt.is_ok()) << rt.status().message();
  EXPECT_LT(resident_bytes() - before, int64_t(128) << 20) << "opening touched the 1 GiB KV pool";
  const auto c = nlohmann::json::parse(test::read_file(test::shared_path("golden/stories260k-once/case.json")));
  Request r;
  r.text = "Once upon a time";
  r.max_tokens = 64;
  r.sampling.temperature = 0;
  auto text = (*rt)->generate_text(r);
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_EQ(*text, c["greedy"]["output_text"].get<std::string>());
}

// kv_memory_mib 0 (what `autoglm run` asks for): the pool holds max_running whole context
// windows, drafts included, so one sequence runs to the end of its window. And a plain
// request's events carry their text as answer-text parts, no more and no less.
TEST(RuntimeOpen, AZeroKvBudgetHoldsWholeWindows) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  RuntimeOptions o;
  o.threads = 2;
  o.kv_memory_mib = 0;
  o.context_window = 64;
  o.max_running = 1;
  auto one = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
  ASSERT_TRUE(one.is_ok()) << one.status().message();
  o.max_running = 2;
  auto two = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
  ASSERT_TRUE(two.is_ok()) << two.status().message();
  EXPECT_GT((*one)->info().kv_bytes, 0);
  EXPECT_EQ((*two)->info().kv_bytes, 2 * (*one)->info().kv_bytes);
  Request r;
  r.text = "Once upon a time";
  r.max_tokens = 1000;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  auto handle = (*one)->submit(r);
  ASSERT_TRUE(handle.is_ok()) << handle.status().message();
  std::string text, parts;
  StreamEvent ev;
  while ((*handle)->next(ev, std::chrono::seconds(60))) {
    text += ev.text;
    for (const OutputPart& p : ev.parts) {
      EXPECT_EQ(p.kind, PartKind::kText);
      parts += p.text;
    }
    if (ev.finished) break;
  }
  ASSERT_TRUE(ev.finished) << "the request never finished";
  EXPECT_EQ(ev.finish_reason, FinishReason::kLength);
  EXPECT_EQ(ev.prompt_tokens + ev.completion_tokens, 64) << "stopped short of the window";
  EXPECT_EQ(parts, text);
}

TEST(RuntimeOpen, ErrorsNameTheCulprit) {
  auto missing = Runtime::open("/no/such/model.gguf");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("/no/such/model.gguf"), std::string::npos) << missing.status().message();
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  RuntimeOptions o;
  o.quantize = "q9_9";
  auto bad = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("quantize: 'q9_9'"), std::string::npos) << bad.status().message();
  o.quantize = "";
  const auto q3 = kv_type_from_name("q3");  // the one parse of a KV type's name
  ASSERT_FALSE(q3.is_ok());
  EXPECT_EQ(q3.status().message(), "KV cache type 'q3' is not one of f32, f16, q8_0");
  EXPECT_EQ(kv_type_from_name("Q8_0").value(), KvType::kQ8_0);
  EXPECT_STREQ(kv_type_name(KvType::kQ8_0), "q8_0");
}

// Each speculation method runs in the engine, the same text as without drafts; bad options
// are refused at open, naming the option.
TEST(RuntimeOpen, EachSpeculationMethodGivesThePlainText) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  const std::string path = test::shared_path("models/stories260K.gguf");
  RuntimeOptions o;
  o.threads = 2;
  o.kv_memory_mib = 16;
  EXPECT_NE(spec_method_from_name("medusa").status().message().find("spec: 'medusa'"), std::string::npos);
  for (const auto& [method, culprit] : std::vector<std::pair<SpecMethod, std::string>>{
           {SpecMethod::kDraft, "--draft-quantize"}, {SpecMethod::kNgram, "draft-max"}}) {
    o.speculative = method;
    o.draft_max = method == SpecMethod::kNgram ? 0 : 8;
    auto bad = Runtime::open(path, o);
    ASSERT_FALSE(bad.is_ok()) << spec_method_name(method);
    EXPECT_NE(bad.status().message().find(culprit), std::string::npos) << bad.status().message();
  }
  o.speculative = SpecMethod::kNgram;
  o.draft_max = 6;
  o.draft_quantize = "q8_0";
  auto bad = Runtime::open(path, o);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("only with the method draft"), std::string::npos) << bad.status().message();
  o.draft_quantize = "";
  Request r;
  r.text = "Lily went to the park. She saw a big dog. Lily went to the park. She saw a big";
  r.max_tokens = 40;
  r.sampling.temperature = 0;
  for (const std::string method : {"ngram", "draft", "early-exit"}) {
    o.speculative = spec_method_from_name(method).value();
    o.draft_quantize = method == "draft" ? "q8_0" : "";
    o.exit_layer = method == "early-exit" ? 3 : 0;
    auto rt = Runtime::open(path, o);
    ASSERT_TRUE(rt.is_ok()) << rt.status().message();
    r.speculative = true;
    auto fast = (*rt)->generate_text(r);
    r.speculative = false;
    auto plain = (*rt)->generate_text(r);
    ASSERT_TRUE(fast.is_ok() && plain.is_ok()) << method;
    EXPECT_EQ(*fast, *plain) << method;
  }
}

TEST_F(RuntimeApi, GreedyTextIsTheReference) {
  const auto c = nlohmann::json::parse(test::read_file(test::shared_path("golden/stories260k-once/case.json")));
  auto text = rt->generate_text(greedy("Once upon a time", 64));
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_EQ(*text, c["greedy"]["output_text"].get<std::string>());
  EXPECT_EQ(rt->stats().generated_tokens, 64);
  EXPECT_EQ(rt->stats().prompt_tokens, 5);
}

TEST_F(RuntimeApi, ARequestHasExactlyOnePromptSource) {
  Request none;
  auto r = rt->submit(none);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("exactly one of tokens, text and chat"), std::string::npos);
  Request two = greedy("Once", 4);
  two.tokens = {1, 2};
  EXPECT_FALSE(rt->submit(two).is_ok());
  Request ids;
  ids.tokens = rt->encode("Once upon a time");
  ids.max_tokens = 64;
  ids.sampling.temperature = 0;
  EXPECT_EQ(rt->generate_text(ids).value(), rt->generate_text(greedy("Once upon a time", 64)).value());
}

TEST_F(RuntimeApi, ChatIsRenderedByTheTemplate) {
  Conversation chat;
  chat.messages = {{"system", "Be brief."}, {"user", "Hi"}};
  auto text = rt->render_chat(chat);
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_EQ(*text, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  auto ids = rt->chat_tokens(chat);
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(ids->front(), rt->special_tokens().bos);
  Conversation bad;
  bad.messages_json = "[{\"role\": ";
  auto r = rt->render_chat(bad);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("messages_json"), std::string::npos);
}

// A whole reply split after the fact (for a program that has the text, not the stream): the
// same calls the stream's parts give, named call_0, call_1, ...; without tools all is content.
TEST_F(RuntimeApi, ParseReplySplitsAWholeText) {
  Conversation c;
  c.messages = {{"user", "Weather in Paris?"}};
  c.tools_json = R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])";
  const std::string text =
      "Sure.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  auto reply = rt->parse_reply(c, text);
  ASSERT_TRUE(reply.is_ok()) << reply.status().message();
  EXPECT_EQ(reply->content, "Sure.");
  ASSERT_EQ(reply->tool_calls.size(), 1u);
  EXPECT_EQ(reply->tool_calls[0].id, "call_0");
  EXPECT_EQ(reply->tool_calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(reply->tool_calls[0].arguments), nlohmann::json::parse(R"({"city": "Paris"})"));
  c.tools_json.clear();
  reply = rt->parse_reply(c, text);
  ASSERT_TRUE(reply.is_ok()) << reply.status().message();
  EXPECT_EQ(reply->content, text);
  EXPECT_TRUE(reply->tool_calls.empty());
}

TEST_F(RuntimeApi, ConstraintsAreGivenAsText) {
  Request r = greedy("Once upon a time", 8);
  r.constraint = {ConstraintKind::kGbnf, "root ::= \"yes\" | \"no\"", ""};
  auto text = rt->generate_text(r);
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_TRUE(*text == "yes" || *text == "no") << *text;
  r.constraint = {ConstraintKind::kJsonSchema, R"({"type": "object", "properties": {"a": {"type": "integer"}},
                                                  "required": ["a"], "additionalProperties": false})",
                  ""};
  r.max_tokens = 32;
  text = rt->generate_text(r);
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  const auto j = nlohmann::json::parse(*text, nullptr, false);
  ASSERT_TRUE(j.is_object()) << *text;
  EXPECT_TRUE(j["a"].is_number_integer()) << *text;
  r.constraint = {ConstraintKind::kGbnf, "root ::= (", ""};
  auto bad = rt->submit(r);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message().rfind("constraint: ", 0), 0u) << bad.status().message();
  r.constraint.source = "my.gbnf";  // errors name where the text came from
  bad = rt->submit(r);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message().rfind("my.gbnf: ", 0), 0u) << bad.status().message();
}

TEST(RuntimeOpen, RequestLimitsApplyToSubmit) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  RuntimeOptions o;
  o.threads = 2;
  o.kv_memory_mib = 16;
  o.limits.json_depth = 4;
  o.limits.prompt_tokens = 60;
  o.limits.stop_strings = 1;
  o.limits.grammar_symbols = 300;
  auto rt = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
  ASSERT_TRUE(rt.is_ok()) << rt.status().message();
  const auto refused = [&](const Request& r, const std::string& limit) {
    auto handle = (*rt)->submit(r);
    ASSERT_FALSE(handle.is_ok()) << limit;
    EXPECT_NE(handle.status().message().find("limit " + limit), std::string::npos) << handle.status().message();
  };
  Request r;
  for (int i = 0; i < 20; ++i) r.text += "Once upon a time there was a girl. ";
  refused(r, "prompt_tokens");
  r.text = "Once";
  r.stop = {"a", "b"};
  refused(r, "stop_strings");
  r.stop = {};
  r.constraint = {ConstraintKind::kGbnf, "root ::= \"a\"{0,200}", ""};
  refused(r, "grammar_symbols");
  r.constraint = {};
  r.text.clear();
  r.chat = Conversation{};
  r.chat->messages_json = R"([{"role": "user", "content": "hi", "x": [[[[1]]]]}])";
  refused(r, "json_depth");
  r.chat->messages_json = R"([{"role": "user", "content": "hi"}])";
  r.max_tokens = 2;
  EXPECT_TRUE((*rt)->generate_text(r).is_ok());
}

TEST_F(RuntimeApi, LogitsOfOnePassPickTheGreedyToken) {
  const auto ids = rt->encode("Once upon a time");
  auto rows = rt->logits(ids, true);
  ASSERT_TRUE(rows.is_ok()) << rows.status().message();
  const size_t n_vocab = size_t(rt->vocab_size());
  ASSERT_EQ(rows->size(), ids.size() * n_vocab);
  const float* last = rows->data() + rows->size() - n_vocab;
  const int32_t argmax = int32_t(std::max_element(last, last + n_vocab) - last);
  EXPECT_EQ(rt->token_piece(argmax), rt->decode({argmax}));
  EXPECT_EQ(rt->decode({argmax}), ",");  // the reference continuation starts with ","
  auto one = rt->logits(ids, false);
  ASSERT_TRUE(one.is_ok());
  EXPECT_EQ(std::vector<float>(last, last + n_vocab), *one);
  EXPECT_FALSE(rt->logits({-1}, false).is_ok());
}

// A second model on the first one's threads: both answer at once, each exactly what it
// answers alone (steps take turns; no result depends on the other model).
TEST_F(RuntimeApi, AModelOpenedBesideAnotherSharesItsThreads) {
  AUTOGLM_REQUIRE_SHARED("models/llama-2-tiny-random.gguf");
  RuntimeOptions o;
  o.kv_memory_mib = 16;
  o.threads = 7;  // not used: the threads are the first runtime's
  auto beside = Runtime::open_beside(*rt, test::shared_path("models/llama-2-tiny-random.gguf"), o);
  ASSERT_TRUE(beside.is_ok()) << beside.status().message();
  const Request story = greedy("Once upon a time", 40), other = greedy("Hello", 40);
  // An error is a test failure, never a dereference of an empty result (in a thread, too).
  auto text_of = [](Result<std::string> r) {
    if (r.is_ok()) return *r;
    ADD_FAILURE() << r.status().message();
    return std::string();
  };
  const std::string story_alone = text_of(rt->generate_text(story)),
                    other_alone = text_of((*beside)->generate_text(other));
  std::string story_together, other_together;
  std::thread second([&] { other_together = text_of((*beside)->generate_text(other)); });
  story_together = text_of(rt->generate_text(story));
  second.join();
  EXPECT_EQ(story_together, story_alone);
  EXPECT_EQ(other_together, other_alone);
  auto tokenizer_only = Runtime::open_tokenizer(test::shared_path("models/hf/qwen2-tiny"));
  ASSERT_TRUE(tokenizer_only.is_ok());
  EXPECT_FALSE(Runtime::open_beside(**tokenizer_only, test::shared_path("models/stories260K.gguf")).is_ok());
}

TEST(RuntimeOpen, WithoutAnEngineOnlyTheFacadesWork) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  RuntimeOptions o;
  o.start_engine = false;
  auto rt = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
  ASSERT_TRUE(rt.is_ok()) << rt.status().message();
  Request r;
  r.text = "Once";
  EXPECT_FALSE((*rt)->submit(r).is_ok());
  // SentencePiece adds its dummy prefix space; decode keeps it.
  EXPECT_EQ((*rt)->decode((*rt)->encode("Once upon a time", false)), " Once upon a time");
  EXPECT_EQ((*rt)->info().architecture, "llama");
  EXPECT_GT((*rt)->info().n_params, 0);
}

}  // namespace
}  // namespace autoglm
