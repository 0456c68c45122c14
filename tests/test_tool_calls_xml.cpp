// GLM-4.5/4.6, GLM-4.7 and Qwen3-Coder's XML tool calls: the family read off each model's own template
// (tests/data/chat_templates), the parser round-tripping what the template renders for an
// assistant turn with thinking and calls (split at every byte boundary, string arguments raw,
// others JSON), and the forcing grammar accepting that rendering and refusing keys the schema
// does not have.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/harmony.h"
#include "chat/reply_shaper.h"
#include "chat/tool_calls.h"
#include "reply_test_util.h"
#include "sample/grammar.h"
#include "test_util.h"

namespace autoglm {
namespace {

using json = nlohmann::ordered_json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "The weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "units": {"type": "string"}},
    "required": ["city", "days"]}}},
  {"type": "function", "function": {"name": "now", "description": "The time", "parameters": {"type": "object",
    "properties": {}}}}
])");

// Whether `grammar` takes all of `text` and may end there.
bool grammar_accepts(const std::shared_ptr<const Grammar>& grammar, const std::string& text) {
  GrammarState s = GrammarState(grammar).advance_bytes(text);
  return !s.dead() && s.accepting();
}

std::string template_text(const std::string& file) {
  return test::read_file(std::string(AUTOGLM_SOURCE_DIR) + "/tests/data/chat_templates/" + file);
}

// What the model writes for an assistant turn (the last, so its reasoning is rendered), as its
// template renders it: the text after the generation prompt. `prompt`: that generation prompt.
std::string assistant_turn(const ChatTemplate& t, const json& assistant, std::string* prompt = nullptr) {
  const json user = json::array({{{"role", "user"}, {"content", "Weather in Paris for 3 days, and the time?"}}});
  json both = user;
  both.push_back(assistant);
  auto prefix = t.render(user, kTools, true, json::object());
  auto full = t.render(both, kTools, false, json::object());
  EXPECT_TRUE(prefix.is_ok() && full.is_ok());
  if (!prefix || !full) return "";
  EXPECT_EQ(full->compare(0, prefix->size(), *prefix), 0) << "the conversation does not extend the prompt";
  if (prompt) *prompt = *prefix;
  std::string turn = full->substr(prefix->size());
  // Where the model's text ends: at its end-of-generation token (chatml's, DeepSeek's, harmony's).
  for (const char* end : {"<|im_end|>", "<｜end▁of▁sentence｜>", "<|call|>", "<|return|>"})
    turn = turn.substr(0, turn.find(end));
  return turn;
}

const json kAssistant = json::parse(R"({"role": "assistant", "content": "",
  "reasoning_content": "Two calls.",
  "tool_calls": [
    {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}},
    {"type": "function", "function": {"name": "now", "arguments": {}}}]})");

// `reasoning`: what the template renders of the turn's reasoning (DeepSeek V3.1's drops it).
void expect_round_trip(const std::string& file, ToolCallFamily family,
                       const std::string& reasoning_kept = "Two calls.") {
  const std::string source = template_text(file);
  ASSERT_EQ(tool_call_family(source), family) << file;
  auto t = ChatTemplate::parse(source);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  std::string prompt;
  const std::string turn = assistant_turn(*t, kAssistant, &prompt);
  ASSERT_NE(turn.find("city"), std::string::npos) << turn;
  const bool thinks = template_thinks(source);
  ReplyFormat f;
  f.tools = true;
  f.family = family;
  f.tool_names = {"get_weather", "now"};
  f.tool_objects = kTools;
  f.reasoning = thinks;
  f.starts_thinking = thinks && prompt_opens_thinking(prompt);
  for (size_t cut = 0; cut <= turn.size(); ++cut) {
    const test::ShapedReply r = test::shape_at_cut(f, turn, cut);
    const std::string &reasoning = r.reasoning, &answer = r.answer;
    const auto& calls = r.calls;
    ASSERT_EQ(calls.size(), size_t(2)) << file << " cut at " << cut << ": " << turn;
    EXPECT_EQ(reasoning, thinks ? reasoning_kept : "") << file << " cut at " << cut;
    EXPECT_EQ(answer.find_first_not_of(" \n"), std::string::npos) << file << " cut at " << cut << ": " << answer;
    EXPECT_EQ(calls[0].first, "get_weather");
    EXPECT_EQ(json::parse(calls[0].second), json({{"city", "Paris"}, {"days", 3}})) << calls[0].second;
    EXPECT_EQ(calls[1].first, "now");
    EXPECT_EQ(json::parse(calls[1].second), json::object());
    EXPECT_EQ(r.finish, FinishReason::kToolCalls);
  }
}

TEST(XmlToolCalls, Glm46RendersAndParsesBack) {
  expect_round_trip("glm-4.6.jinja", ToolCallFamily::kGlm45);
}

TEST(XmlToolCalls, Glm47RendersAndParsesBack) {
  expect_round_trip("glm-4.7.jinja", ToolCallFamily::kGlm47);
}

TEST(XmlToolCalls, Qwen3CoderRendersAndParsesBack) {
  expect_round_trip("qwen3-coder.jinja", ToolCallFamily::kQwen3Coder);
}

TEST(XmlToolCalls, DeepSeekV31RendersAndParsesBack) {
  expect_round_trip("deepseek-v3.1.jinja", ToolCallFamily::kDeepSeekV31, "");
}

// gpt-oss: one call per assistant message, its analysis kept before it; the reply is harmony
// throughout (the analysis channel as reasoning), read by HarmonyParser at every byte boundary.
TEST(HarmonyReplies, GptOssRendersAndParsesBack) {
  const std::string source = template_text("gpt-oss.jinja");
  ASSERT_EQ(tool_call_family(source), ToolCallFamily::kHarmony);
  auto t = ChatTemplate::parse(source);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  const json assistant = json::parse(R"({"role": "assistant", "content": "", "thinking": "One call.",
    "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}]})");
  const std::string turn = assistant_turn(*t, assistant);
  ASSERT_NE(turn.find("to=functions.get_weather"), std::string::npos) << turn;
  ReplyFormat f;
  f.tools = true;
  f.family = ToolCallFamily::kHarmony;
  f.tool_names = {"get_weather", "now"};
  f.harmony = true;
  f.reasoning = true;
  for (size_t cut = 0; cut <= turn.size(); ++cut) {
    const test::ShapedReply r = test::shape_at_cut(f, turn, cut);  // <|call|> ends the generation
    ASSERT_EQ(r.calls.size(), 1u) << "cut at " << cut << ": " << turn;
    const std::string &reasoning = r.reasoning, &answer = r.answer, &name = r.calls[0].first,
                      &arguments = r.calls[0].second;
    EXPECT_EQ(reasoning, "One call.") << "cut at " << cut << ": " << turn;
    EXPECT_EQ(answer, "") << "cut at " << cut;
    EXPECT_EQ(name, "get_weather") << "cut at " << cut;
    EXPECT_EQ(json::parse(arguments), json({{"city", "Paris"}, {"days", 3}})) << arguments;
    EXPECT_EQ(r.finish, FinishReason::kToolCalls);
  }
}

TEST(HarmonyReplies, AnalysisThenFinalAtEveryByteBoundary) {
  const std::string text =
      "<|channel|>analysis<|message|>Think <|en|> here.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>The answer.";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    HarmonyParser p;
    HarmonyParser::Output a = p.push(text.substr(0, cut)), b = p.push(text.substr(cut)), c = p.finish();
    EXPECT_EQ(a.reasoning + b.reasoning + c.reasoning, "Think <|en|> here.") << "cut at " << cut;
    EXPECT_EQ(a.content + b.content + c.content, "The answer.") << "cut at " << cut;
  }
}

TEST(HarmonyReplies, PlainTextAndACutCallAndTheRecipientAfterTheChannel) {
  HarmonyParser plain;
  EXPECT_EQ(plain.push("Just text").content + plain.finish().content, "Just text");
  HarmonyParser call;  // the recipient after the channel, as gpt-oss also writes it
  call.push("<|channel|>commentary to=functions.now <|constrain|>json<|message|>{}");
  const HarmonyParser::Output done = call.finish();
  ASSERT_EQ(done.calls.size(), 1u);
  EXPECT_EQ(done.calls[0].name, "now");
  EXPECT_EQ(done.calls[0].arguments, "{}");
  HarmonyParser cut;
  cut.push("<|channel|>commentary to=functions.now <|constrain|>json<|message|>{\"a\": ");
  EXPECT_TRUE(cut.finish(/*cut_short=*/true).calls.empty()) << "a call cut by max_tokens is dropped";
}

// The forcing grammar writes a call as gpt-oss does (the recipient after the channel, as OpenAI's
// harmony guide shows it), first or after an analysis message (a new header).
TEST(HarmonyReplies, TheForcingGrammarWritesAMessageToTheFunction) {
  auto gbnf = tool_call_grammar(ToolCallFamily::kHarmony, nlohmann::json(kTools), "");
  ASSERT_TRUE(gbnf.is_ok()) << gbnf.status().message();
  auto grammar = Grammar::parse(*gbnf);
  ASSERT_TRUE(grammar.is_ok()) << grammar.status().message();
  auto accepts = [&](const std::string& text) { return grammar_accepts(*grammar, text); };
  const std::string call = R"(<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>)"
                           R"({"city": "Paris", "days": 3})";
  EXPECT_TRUE(accepts(call)) << *gbnf;
  EXPECT_TRUE(accepts("<|start|>assistant" + call));
  EXPECT_FALSE(accepts(R"(<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"town": "P"})"));
  HarmonyParser p;
  p.push(call);
  const HarmonyParser::Output out = p.finish();
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(json::parse(out.calls[0].arguments), json({{"city", "Paris"}, {"days", 3}}));
}

// Model text need not be valid UTF-8 (a byte-fallback token alone): a call holding a bad byte
// still parses, the byte as U+FFFD (found by fuzz_tool_calls: the arguments' dump threw).
TEST(XmlToolCalls, ABadUtf8ByteInACallIsReplacedNotThrown) {
  ToolCallParser p(ToolCallFamily::kQwen3Coder, {"get_weather"}, "call_");
  p.set_tools(kTools);
  ToolCallParser::Output out;
  EXPECT_NO_THROW(out = p.push("<tool_call>\n<function=get_weather>\n<parameter=city>\nPa\x9cris\n</parameter>\n"
                               "</function>\n</tool_call>"));
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(json::parse(out.calls[0].arguments)["city"], "Pa\xef\xbf\xbdris");
}

TEST(XmlToolCalls, AStringArgumentStaysRawAndANonStringIsJson) {
  ToolCallParser p(ToolCallFamily::kGlm45, {"get_weather"}, "call_");
  p.set_tools(kTools);
  auto out = p.push(
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>42</arg_value>\n<arg_key>days</arg_key>\n"
      "<arg_value>2</arg_value>\n</tool_call>");
  ASSERT_EQ(out.calls.size(), size_t(1));
  EXPECT_EQ(json::parse(out.calls[0].arguments), json({{"city", "42"}, {"days", 2}}));
  ToolCallParser broken(ToolCallFamily::kGlm45, {"get_weather"}, "call_");
  auto text = broken.push("<tool_call>get_weather\n<arg_key>city</arg_key>oops</tool_call>");
  auto rest = broken.finish();
  EXPECT_TRUE(text.calls.empty() && rest.calls.empty());
  EXPECT_EQ(text.content + rest.content, "<tool_call>get_weather\n<arg_key>city</arg_key>oops</tool_call>")
      << "what is not a call is given back as text";
}

// The forcing grammar accepts each template's own rendering of a call and refuses what the
// schema does not allow (an unknown key, a missing required one, a non-integer day count).
void expect_grammar(const std::string& file, ToolCallFamily family) {
  auto t = ChatTemplate::parse(template_text(file));
  ASSERT_TRUE(t.is_ok());
  json one = kAssistant;
  one["tool_calls"] = json::array({kAssistant["tool_calls"][0]});
  std::string turn = assistant_turn(*t, one);
  const size_t open = turn.find("<tool_call>");
  const std::string call = turn.substr(open, turn.find("</tool_call>") + 12 - open);
  auto gbnf = tool_call_grammar(family, nlohmann::json(kTools), "");
  ASSERT_TRUE(gbnf.is_ok()) << gbnf.status().message();
  auto grammar = Grammar::parse(*gbnf);
  ASSERT_TRUE(grammar.is_ok()) << grammar.status().message() << "\n" << *gbnf;
  auto accepts = [&](const std::string& text) { return grammar_accepts(*grammar, text); };
  EXPECT_TRUE(accepts(call)) << file << ": " << call << "\n" << *gbnf;
  std::string unknown = call;
  unknown.replace(unknown.find("city"), 4, "town");
  EXPECT_FALSE(accepts(unknown)) << unknown;
  std::string not_integer = call;
  const size_t day_count = not_integer.find('3', not_integer.find("days"));
  ASSERT_NE(day_count, std::string::npos) << call;
  not_integer[day_count] = 'x';
  EXPECT_FALSE(accepts(not_integer)) << not_integer;
  const auto empty = [&](const std::string& name) {
    std::string text = family == ToolCallFamily::kQwen3Coder ? "<tool_call>\n<function=" : "<tool_call>";
    text.append(name);
    if (family == ToolCallFamily::kQwen3Coder) text.append(">\n</function>\n");
    if (family == ToolCallFamily::kGlm45) text.append("\n");
    text.append("</tool_call>");
    return text;
  };
  EXPECT_TRUE(accepts(empty("now")));
  EXPECT_FALSE(accepts(empty("get_weather"))) << "city and days are required";
}

TEST(XmlToolCalls, TheForcingGrammarAcceptsTheTemplatesCallAndNothingElse) {
  expect_grammar("glm-4.6.jinja", ToolCallFamily::kGlm45);
  expect_grammar("glm-4.7.jinja", ToolCallFamily::kGlm47);
  expect_grammar("qwen3-coder.jinja", ToolCallFamily::kQwen3Coder);
}

// DeepSeek V3.1's forcing grammar accepts the template's own rendering of one call and refuses
// a key the schema does not have.
TEST(XmlToolCalls, TheDeepSeekV31GrammarAcceptsTheTemplatesCall) {
  auto t = ChatTemplate::parse(template_text("deepseek-v3.1.jinja"));
  ASSERT_TRUE(t.is_ok());
  json one = kAssistant;
  one["tool_calls"] = json::array({kAssistant["tool_calls"][0]});
  const std::string call = assistant_turn(*t, one);
  ASSERT_EQ(call.rfind("<｜tool▁calls▁begin｜>", 0), 0u) << call;
  auto gbnf = tool_call_grammar(ToolCallFamily::kDeepSeekV31, nlohmann::json(kTools), "");
  ASSERT_TRUE(gbnf.is_ok()) << gbnf.status().message();
  auto grammar = Grammar::parse(*gbnf);
  ASSERT_TRUE(grammar.is_ok()) << grammar.status().message();
  auto accepts = [&](const std::string& text) { return grammar_accepts(*grammar, text); };
  EXPECT_TRUE(accepts(call)) << call << "\n" << *gbnf;
  std::string unknown = call;
  unknown.replace(unknown.find("city"), 4, "town");
  EXPECT_FALSE(accepts(unknown)) << unknown;
}

}  // namespace
}  // namespace autoglm
