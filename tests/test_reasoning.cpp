// A thinking model's reasoning apart from its answer: the split (<think>...</think>) at every
// byte boundary, a reply cut inside the thinking, a prompt that opened the thinking, reasoning
// before a tool call; and over HTTP with Qwen3's own template and a grammar-forced reply:
// reasoning_content (whole and streamed), reasoning_format none byte for byte, the config
// default and a bad value named.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "chat/reasoning_split.h"
#include "chat/reply_shaper.h"
#include "reply_test_util.h"
#include "server_test_util.h"
#include "sse_test_util.h"

namespace autoglm {
namespace {

using json = nlohmann::json;

using test::sse_data_lines;

struct Split {
  std::string reasoning, content;
};

// The text fed in pieces cut at `cuts` (ascending), then finished.
Split split_at(const std::string& text, const std::vector<size_t>& cuts, bool thinking = false) {
  ReasoningSplit s(thinking);
  Split out;
  size_t from = 0;
  auto add = [&](const ReasoningSplit::Output& o) {
    out.reasoning += o.reasoning;
    out.content += o.content;
  };
  for (size_t cut : cuts) {
    add(s.push(text.substr(from, cut - from)));
    from = cut;
  }
  add(s.push(text.substr(from)));
  add(s.finish());
  return out;
}

void expect_split_everywhere(const std::string& text, const std::string& reasoning, const std::string& content,
                             bool thinking = false) {
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const Split s = split_at(text, {cut}, thinking);
    EXPECT_EQ(s.reasoning, reasoning) << "cut at " << cut << " of '" << text << "'";
    EXPECT_EQ(s.content, content) << "cut at " << cut << " of '" << text << "'";
  }
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  const Split bytes = split_at(text, every, thinking);
  EXPECT_EQ(bytes.reasoning, reasoning) << "byte by byte: '" << text << "'";
  EXPECT_EQ(bytes.content, content) << "byte by byte: '" << text << "'";
}

TEST(ReasoningSplit, ThinkingAndAnswerAtEveryByteBoundary) {
  expect_split_everywhere("<think>Let me see.</think>\n\nHello!", "Let me see.", "Hello!");
  expect_split_everywhere("\n<think>a</think>b", "a", "b");
  expect_split_everywhere("No thinking here.", "", "No thinking here.");
  expect_split_everywhere("  spaced answer", "", "  spaced answer");
  expect_split_everywhere("<thinking> is not the marker", "", "<thinking> is not the marker");
  expect_split_everywhere("<think>a </thin b </think> c", "a </thin b ", "c");
  expect_split_everywhere("<think></think>\n\nanswer", "", "answer");
  expect_split_everywhere("<think>x</think>answer with </think> inside", "x", "answer with </think> inside");
}

TEST(ReasoningSplit, ACutInsideTheThinkingKeepsWhatItThought) {
  expect_split_everywhere("<think>half a tho", "half a tho", "");
  expect_split_everywhere("<think>ends on a marker's start </th", "ends on a marker's start </th", "");
  expect_split_everywhere("<thi", "", "<thi");
}

TEST(ReasoningSplit, APromptThatOpenedTheThinkingStartsInside) {
  expect_split_everywhere("reasoning goes on</think>\n\nthe answer", "reasoning goes on", "the answer", true);
  EXPECT_TRUE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n"));
  EXPECT_TRUE(template_thinks("{{ '<think>' }}"));
  EXPECT_FALSE(template_thinks("{{ messages }}"));
}

TEST(ReplyShaper, ReasoningComesApartFromTheToolCallThatFollows) {
  ReplyFormat f;
  f.tools = true;
  f.family = ToolCallFamily::kHermes;
  f.tool_names = {"get_weather"};
  f.reasoning = true;
  const std::string text =
      "<think>The user wants the weather.</think>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\"}}\n</tool_call>";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const test::ShapedReply r = test::shape_at_cut(f, text, cut);
    EXPECT_EQ(r.reasoning, "The user wants the weather.") << "cut at " << cut;
    EXPECT_EQ(r.answer, "") << "cut at " << cut;
    ASSERT_EQ(r.calls.size(), 1u) << "cut at " << cut;
    EXPECT_EQ(r.calls[0].first, "get_weather") << "cut at " << cut;
    EXPECT_EQ(json::parse(r.calls[0].second), json({{"city", "Paris"}})) << "cut at " << cut;
    EXPECT_EQ(r.finish, FinishReason::kToolCalls);
  }
}

// Qwen3's own template (it marks thinking) over stories260K, the reply forced by a grammar.
class ReasoningServer : public test::ServerTest {
 protected:
  void start_qwen3(const ServerConfig* base = nullptr) {
    ServerConfig cfg;
    if (base) cfg = *base;
    AUTOGLM_REQUIRE_SHARED("models/hf-tokenizers/qwen3/tokenizer_config.json");
    const json tc = json::parse(test::read_file(test::shared_path("models/hf-tokenizers/qwen3/tokenizer_config.json")));
    const std::string path = ::testing::TempDir() + "/qwen3_template.jinja";
    {
      std::ofstream f(path);
      f << tc["chat_template"].get<std::string>();
    }
    cfg.runtime.chat_template = path;
    start(cfg);
  }
  test::HttpResult chat(json extra) {
    json body = {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                 {"grammar", "root ::= \"<think>Greet back.</think>\\n\\nHello there\""},
                 {"max_tokens", 64}};
    for (auto& [k, v] : extra.items()) body[k] = v;
    return test::http_call(port, "POST", "/v1/chat/completions", body.dump());
  }
};

TEST_F(ReasoningServer, ReasoningContentApartFromTheAnswer) {
  start_qwen3();
  const auto r = chat(json::object());
  ASSERT_EQ(r.status, 200) << r.body;
  const json message = json::parse(r.body)["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], "Greet back.");
  EXPECT_EQ(message["content"], "Hello there");
}

TEST_F(ReasoningServer, StreamedReasoningComesAsReasoningContentDeltas) {
  start_qwen3();
  const auto r = chat({{"stream", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  std::string reasoning, content;
  bool content_before_reasoning_ended = false;
  for (const std::string& line : sse_data_lines(r.body)) {
    if (line == "[DONE]") continue;
    const json delta = json::parse(line)["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) {
      content_before_reasoning_ended = content_before_reasoning_ended || !content.empty();
      reasoning += delta["reasoning_content"].get<std::string>();
    }
    if (delta.contains("content") && delta["content"].is_string()) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "Greet back.");
  EXPECT_EQ(content, "Hello there");
  EXPECT_FALSE(content_before_reasoning_ended);
}

TEST_F(ReasoningServer, FormatNoneLeavesEveryByteInTheContent) {
  start_qwen3();
  const auto r = chat({{"reasoning_format", "none"}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json message = json::parse(r.body)["choices"][0]["message"];
  EXPECT_EQ(message["content"], "<think>Greet back.</think>\n\nHello there");
  EXPECT_FALSE(message.contains("reasoning_content"));
  // The Open-AutoGLM phone agent's contract: it reads <think> and <answer> itself.
  const std::string agent = "<think>Tap the icon.</think><answer>do(action=\"Tap\", element=[500,100])</answer>";
  const auto raw =
      chat({{"reasoning_format", "none"}, {"grammar", "root ::= " + json(agent).dump()}, {"max_tokens", 300}});
  ASSERT_EQ(raw.status, 200) << raw.body;
  EXPECT_EQ(json::parse(raw.body)["choices"][0]["message"]["content"], agent);
  const auto bad = chat({{"reasoning_format", "sometimes"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(json::parse(bad.body)["error"]["param"], "reasoning_format") << bad.body;
}

TEST_F(ReasoningServer, TheConfiguredFormatIsTheDefault) {
  ServerConfig cfg;
  cfg.reasoning_format = ReasoningFormat::kNone;
  start_qwen3(&cfg);
  const auto r = chat(json::object());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["message"]["content"], "<think>Greet back.</think>\n\nHello there");
  const auto split = chat({{"reasoning_format", "deepseek"}});
  EXPECT_EQ(json::parse(split.body)["choices"][0]["message"]["reasoning_content"], "Greet back.");
}

// The Responses API: the reasoning as a reasoning item before the message, streamed as
// response.reasoning_text.delta events; given back in `input`, it is the next turn's reasoning.
TEST_F(ReasoningServer, ResponsesGiveTheReasoningAsAnItem) {
  start_qwen3();
  const json body = {{"input", "Hi"},
                     {"grammar", "root ::= \"<think>Greet back.</think>\\n\\nHello there\""},
                     {"max_output_tokens", 64}};
  const auto r = test::http_call(port, "POST", "/v1/responses", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json out = json::parse(r.body)["output"];
  ASSERT_EQ(out.size(), 2u) << r.body;
  EXPECT_EQ(out[0]["type"], "reasoning");
  EXPECT_EQ(out[0]["content"][0], json({{"type", "reasoning_text"}, {"text", "Greet back."}}));
  EXPECT_EQ(out[1]["type"], "message");
  EXPECT_EQ(out[1]["content"][0]["text"], "Hello there");
  EXPECT_GT(json::parse(r.body)["usage"]["output_tokens_details"]["reasoning_tokens"].get<int>(), 0);

  json streamed = body;
  streamed["stream"] = true;
  const auto s = test::http_call(port, "POST", "/v1/responses", streamed.dump());
  std::string reasoning, text;
  for (const auto& [name, data] : test::sse_events(s.body)) {
    if (name == "response.reasoning_text.delta") {
      EXPECT_TRUE(text.empty()) << "the reasoning comes before the answer";
      reasoning += data["delta"].get<std::string>();
    }
    if (name == "response.output_text.delta") text += data["delta"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "Greet back.");
  EXPECT_EQ(text, "Hello there");

  json next = body;  // the items given back, a reasoning item among them
  next["input"] =
      json::array({{{"role", "user"}, {"content", "Hi"}}, out[0], out[1], {{"role", "user"}, {"content", "Again"}}});
  const auto again = test::http_call(port, "POST", "/v1/responses", next.dump());
  EXPECT_EQ(again.status, 200) << again.body;
  json bad_effort = body;
  bad_effort["reasoning"] = {{"effort", "extreme"}};
  const auto refused = test::http_call(port, "POST", "/v1/responses", bad_effort.dump());
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(json::parse(refused.body)["error"]["param"], "reasoning.effort") << refused.body;
}

TEST(ReasoningConfig, TheKeyIsReadAndABadValueNamed) {
  auto none = parse_server_config("reasoning_format: none\n", "t.yaml");
  ASSERT_TRUE(none.is_ok()) << none.status().message();
  EXPECT_EQ(none->reasoning_format, ReasoningFormat::kNone);
  auto bad = parse_server_config("reasoning_format: maybe\n", "t.yaml");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("reasoning_format"), std::string::npos) << bad.status().message();
}

TEST(ReasoningConfig, ToolCallFormatIsReadAndABadValueNamed) {
  auto set = parse_server_config("tool_call_format: deepseek_v3_1\n", "t.yaml");
  ASSERT_TRUE(set.is_ok()) << set.status().message();
  EXPECT_EQ(set->runtime.tool_call_format, "deepseek_v3_1");
  auto bad = parse_server_config("tool_call_format: xml\n", "t.yaml");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("tool_call_format"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("harmony"), std::string::npos) << "the formats are listed";
}

// A model family's own template (tests/data/chat_templates) over stories260K, the reply forced
// by a grammar: its reasoning and calls come back as reasoning_content and tool_calls.
class TemplateServer : public test::ServerTest {
 protected:
  void start_with(const std::string& template_file, const std::string& tool_call_format = "") {
    ServerConfig cfg;
    cfg.runtime.chat_template = std::string(AUTOGLM_SOURCE_DIR) + "/tests/data/chat_templates/" + template_file;
    cfg.runtime.tool_call_format = tool_call_format;
    start(cfg);
  }
  json chat(const std::string& output, bool tools) {
    json body = {{"messages", json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}})},
                 {"grammar", "root ::= " + json(output).dump()},
                 {"max_tokens", 300}};
    if (tools)
      body["tools"] = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
        "description": "The weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
    const auto r = test::http_call(port, "POST", "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false);
  }
};

TEST_F(TemplateServer, GptOssHarmonyGivesReasoningAnswerAndCalls) {
  start_with("gpt-oss.jinja");
  const json answer =
      chat("<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>Sunny.", false);
  EXPECT_EQ(answer["choices"][0]["message"]["reasoning_content"], "Simple.") << answer;
  EXPECT_EQ(answer["choices"][0]["message"]["content"], "Sunny.") << answer;
  const json call = chat(
      "<|channel|>analysis<|message|>Use it.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
      "<|constrain|>json<|message|>{\"city\": \"Paris\"}",
      true);
  const json m = call["choices"][0]["message"];
  EXPECT_EQ(m["reasoning_content"], "Use it.") << call;
  ASSERT_EQ(m["tool_calls"].size(), 1u) << call;
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(call["choices"][0]["finish_reason"], "tool_calls");
  // Forced: the analysis (3 tokens: its budget) closes with <|end|>, then the grammar writes the call.
  json forced = {{"messages", json::array({{{"role", "user"}, {"content", "Weather?"}}})},
                 {"tools", json::parse(R"([{"type": "function", "function": {"name": "get_weather",
                   "description": "d", "parameters": {"type": "object", "properties": {"city": {"type": "string",
                   "maxLength": 8}}, "required": ["city"]}}}])")},
                 {"tool_choice", "required"},
                 {"thinking_budget_tokens", 3},
                 {"max_tokens", 200}};
  const auto r = test::http_call(port, "POST", "/v1/chat/completions", forced.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json forced_call = json::parse(r.body)["choices"][0]["message"];
  ASSERT_EQ(forced_call["tool_calls"].size(), 1u) << r.body;
  EXPECT_EQ(forced_call["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_TRUE(
      json::parse(forced_call["tool_calls"][0]["function"]["arguments"].get<std::string>())["city"].is_string());
}

TEST_F(TemplateServer, DeepSeekV31CallsAreToolCalls) {
  start_with("deepseek-v3.1.jinja");
  const json call = chat(
      "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
      true);
  const json m = call["choices"][0]["message"];
  EXPECT_EQ(m["content"], "Checking.") << call;
  ASSERT_EQ(m["tool_calls"].size(), 1u) << call;
  EXPECT_EQ(json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
}

TEST_F(TemplateServer, TheConfiguredToolCallFormatOverridesTheTemplates) {
  start_with("glm-4.6.jinja", "deepseek_v3_1");  // GLM's template, DeepSeek's calls: as configured
  const json call = chat(
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\"}<｜tool▁call▁end｜>"
      "<｜tool▁calls▁end｜>",
      true);
  ASSERT_EQ(call["choices"][0]["message"]["tool_calls"].size(), 1u) << call;
}

}  // namespace
}  // namespace autoglm
