// GLM-4.5/4.6, GLM-4.7 and Qwen3-Coder's XML tool calls: the family read off each model's own template
// (tests/data/chat_templates), the parser round-tripping what the template renders for an
// assistant turn with thinking and calls (split at every byte boundary, string arguments raw,
// others JSON), and the forcing grammar accepting that rendering and refusing keys the schema
// does not have.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/reply_shaper.h"
#include "chat/tool_calls.h"
#include "sample/grammar.h"
#include "test_util.h"

namespace autoglm {
namespace {

using json = nlohmann::ordered_json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "units": {"type": "string"}},
    "required": ["city", "days"]}}},
  {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}
])");

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
  const std::string turn = full->substr(prefix->size());
  return turn.substr(0, turn.find("<|im_end|>"));  // chatml's end of turn (Qwen3-Coder)
}

const json kAssistant = json::parse(R"({"role": "assistant", "content": "",
  "reasoning_content": "Two calls.",
  "tool_calls": [
    {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}},
    {"type": "function", "function": {"name": "now", "arguments": {}}}]})");

void expect_round_trip(const std::string& file, ToolCallFamily family) {
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
    ReplyShaper shaper(f);
    StreamEvent a, b;
    a.text = turn.substr(0, cut);
    b.text = turn.substr(cut);
    b.finished = true;
    b.finish_reason = FinishReason::kStop;
    shaper.shape(a);
    shaper.shape(b);
    std::string reasoning, answer;
    std::vector<std::pair<std::string, std::string>> calls;
    for (const StreamEvent* ev : {&a, &b})
      for (const OutputPart& p : ev->parts) {
        if (p.kind == PartKind::kReasoning) reasoning += p.text;
        if (p.kind == PartKind::kText) answer += p.text;
        if (p.kind == PartKind::kToolCallBegin) calls.emplace_back(p.text, "");
        if (p.kind == PartKind::kToolCallArguments) calls.back().second += p.text;
      }
    ASSERT_EQ(calls.size(), size_t(2)) << file << " cut at " << cut << ": " << turn;
    EXPECT_EQ(reasoning, thinks ? "Two calls." : "") << file << " cut at " << cut;
    EXPECT_EQ(answer.find_first_not_of(" \n"), std::string::npos) << file << " cut at " << cut << ": " << answer;
    EXPECT_EQ(calls[0].first, "get_weather");
    EXPECT_EQ(json::parse(calls[0].second), json({{"city", "Paris"}, {"days", 3}})) << calls[0].second;
    EXPECT_EQ(calls[1].first, "now");
    EXPECT_EQ(json::parse(calls[1].second), json::object());
    EXPECT_EQ(b.finish_reason, FinishReason::kToolCalls);
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
  auto accepts = [&](const std::string& text) {
    GrammarState s = GrammarState(*grammar).advance_bytes(text);
    return !s.dead() && s.accepting();
  };
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

}  // namespace
}  // namespace autoglm
