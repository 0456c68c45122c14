// Tool-call parsing per model family, whole and streamed one character at a time (the
// same calls and content, no call text ever released as content), family detection, and
// the grammars that force a call.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/reply_shaper.h"
#include "chat/tool_calls.h"
#include "sample/grammar.h"

namespace autoglm {
namespace {

using nlohmann::json;

struct Case {
  ToolCallFamily family;
  std::string text;
  std::string content;                              // expected
  std::vector<std::pair<std::string, json>> calls;  // expected name, arguments
};

const std::vector<std::string> kNames = {"get_weather", "calculator"};

std::vector<Case> cases() {
  using F = ToolCallFamily;
  return {
      {F::kHermes, "Sure.", "Sure.", {}},
      {F::kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
       "",
       {{"get_weather", {{"city", "Paris"}}}}},
      {F::kHermes,
       "Let me check.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a<b\"}}</tool_call>\n"
       "<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1+2\"}}</tool_call>",
       "Let me check.",
       {{"get_weather", {{"city", "a<b"}}}, {"calculator", {{"expression", "1+2"}}}}},
      {F::kHermes, "a < b and <tool", "a < b and <tool", {}},  // a marker prefix at the end
      {F::kHermes, "x<tool_call>{\"name\": oops}</tool_call>", "x<tool_call>{\"name\": oops}</tool_call>", {}},
      {F::kHermes, "<tool_call>{\"name\": \"calculator\"", "<tool_call>{\"name\": \"calculator\"", {}},  // unfinished
      {F::kLlama3,
       "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
       "",
       {{"get_weather", {{"city", "Oslo"}}}}},
      {F::kLlama3,
       "<|python_tag|>{\"name\": \"calculator\", \"parameters\": {\"expression\": \"2*3\"}}",
       "",
       {{"calculator", {{"expression", "2*3"}}}}},
      {F::kLlama3, "The answer is {not json", "The answer is {not json", {}},
      {F::kLlama3, "{\"no\": \"name\"}", "{\"no\": \"name\"}", {}},
      {F::kGlm4, "get_weather\n{\"city\": \"Beijing\"}", "", {{"get_weather", {{"city", "Beijing"}}}}},
      {F::kGlm4, "get weather later", "get weather later", {}},
      {F::kGlm4, "calculator\nnot json", "calculator\nnot json", {}},
  };
}

void check(const Case& c, bool streamed) {
  ToolCallParser p(c.family, kNames, "call_");
  std::string content;
  std::vector<ToolCall> calls;
  auto take = [&](const ToolCallParser::Output& o) {
    content += o.content;
    calls.insert(calls.end(), o.calls.begin(), o.calls.end());
  };
  if (streamed) {
    for (char ch : c.text) {
      take(p.push(std::string(1, ch)));
      // Released content is always a prefix of the expected content: no call text leaks.
      ASSERT_EQ(c.content.compare(0, content.size(), content), 0) << "leaked: '" << content << "' of " << c.text;
    }
  } else {
    take(p.push(c.text));
  }
  take(p.finish());
  EXPECT_EQ(content, c.content) << c.text;
  ASSERT_EQ(calls.size(), c.calls.size()) << c.text;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].name, c.calls[i].first);
    EXPECT_EQ(json::parse(calls[i].arguments), c.calls[i].second);
    EXPECT_EQ(calls[i].id, "call_" + std::to_string(i));
  }
}

TEST(ToolCalls, ParsersWhole) {
  for (const Case& c : cases()) check(c, false);
}

TEST(ToolCalls, ParsersStreamedCharacterByCharacter) {
  for (const Case& c : cases()) check(c, true);
}

// max_tokens cut a call short: the text before it stays, the call's markup never reaches
// the client (and without the cut, an unfinished call comes back as text, as before).
TEST(ToolCalls, ACallCutShortLeavesOnlyTheTextBeforeIt) {
  struct Cut {
    ToolCallFamily family;
    std::string text, content;
  };
  const Cut cuts[] = {
      {ToolCallFamily::kHermes, "Let me look.<tool_call>\n{\"name\": \"get_weather\", \"argu", "Let me look."},
      {ToolCallFamily::kHermes, "Let me look.<tool_c", "Let me look."},
      {ToolCallFamily::kHermes, "Let me look.\n<tool_call>", "Let me look.\n"},
      {ToolCallFamily::kLlama3, "{\"name\": \"get_weather\", \"parameters\": {\"ci", ""},
      {ToolCallFamily::kGlm4, "get_weather\n{\"city\": \"Par", ""},
  };
  for (const Cut& c : cuts) {
    for (bool streamed : {false, true}) {
      ToolCallParser p(c.family, {"get_weather"}, "call_");
      std::string content;
      if (streamed) {
        for (char ch : c.text) content += p.push(std::string(1, ch)).content;
      } else {
        content += p.push(c.text).content;
      }
      const auto rest = p.finish(true);
      EXPECT_TRUE(rest.calls.empty());
      EXPECT_EQ(content + rest.content, c.content) << c.text;
    }
    ToolCallParser whole(c.family, {"get_weather"}, "call_");
    std::string all = whole.push(c.text).content;
    all += whole.finish(false).content;
    EXPECT_EQ(all, c.text) << "not cut short: given back as text";
  }
}

TEST(ToolCalls, FamilyFromTheTemplate) {
  EXPECT_EQ(tool_call_family("{% if tools %}<tools>...<tool_call>{% endif %}"), ToolCallFamily::kHermes);
  EXPECT_EQ(tool_call_family("<|start_header_id|>ipython<|end_header_id|>"), ToolCallFamily::kLlama3);
  EXPECT_EQ(tool_call_family(ChatTemplate::builtin("llama3")->source()), ToolCallFamily::kLlama3);
  EXPECT_EQ(tool_call_family(ChatTemplate::builtin("glm4")->source()), ToolCallFamily::kGlm4);
  EXPECT_EQ(tool_call_family(ChatTemplate::builtin("chatml")->source()), ToolCallFamily::kHermes);
  EXPECT_EQ(tool_call_family("[gMASK]<sop><|observation|>"), ToolCallFamily::kGlm4);
  EXPECT_EQ(tool_call_family("{{ messages }}"), ToolCallFamily::kHermes);
}

TEST(ToolCalls, ForcedCallGrammars) {
  const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "calculator",
      "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}
  ])");
  struct G {
    ToolCallFamily family;
    std::string only, good, bad;
  };
  const std::vector<G> table = {
      {ToolCallFamily::kHermes, "",
       "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1\"}}\n</tool_call>",
       "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"city\": \"1\"}}\n</tool_call>"},
      {ToolCallFamily::kHermes, "get_weather",
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}\n</tool_call>",
       "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1\"}}\n</tool_call>"},
      {ToolCallFamily::kLlama3, "", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"x\"}}",
       "{\"name\": \"get_weather\", \"parameters\": {}}"},
      {ToolCallFamily::kGlm4, "", "calculator\n{\"expression\": \"2\"}", "calculator\n{\"expression\": 2}"},
  };
  for (const G& g : table) {
    auto text = tool_call_grammar(g.family, tools, g.only);
    ASSERT_TRUE(text.is_ok()) << text.status().message();
    auto grammar = Grammar::parse(*text);
    ASSERT_TRUE(grammar.is_ok()) << grammar.status().message() << "\n" << *text;
    EXPECT_TRUE(GrammarState(*grammar).advance_bytes(g.good).accepting()) << g.good << "\n" << *text;
    EXPECT_FALSE(GrammarState(*grammar).advance_bytes(g.bad).accepting()) << g.bad;
  }
  auto missing = tool_call_grammar(ToolCallFamily::kHermes, tools, "nope");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("'nope'"), std::string::npos);
}

// A function whose schema lists no properties takes no arguments: the model may not invent
// keys (additionalProperties defaults to false for tool arguments). An explicit
// additionalProperties schema still makes a map.
TEST(ToolCalls, ArgumentsGetNoKeysTheSchemaDoesNotList) {
  const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "now"}},
    {"type": "function", "function": {"name": "tag",
      "parameters": {"type": "object", "additionalProperties": {"type": "string"}}}}
  ])");
  const auto accepts = [&](const std::string& only, const std::string& arguments) {
    auto text = tool_call_grammar(ToolCallFamily::kHermes, tools, only);
    EXPECT_TRUE(text.is_ok()) << text.status().message();
    auto grammar = text ? Grammar::parse(*text) : Result<std::shared_ptr<const Grammar>>(invalid_argument("no text"));
    EXPECT_TRUE(grammar.is_ok()) << grammar.status().message();
    const std::string call =
        "<tool_call>\n{\"name\": \"" + only + "\", \"arguments\": " + arguments + "}\n</tool_call>";
    return grammar && GrammarState(*grammar).advance_bytes(call).accepting();
  };
  EXPECT_TRUE(accepts("ping", "{}"));
  EXPECT_FALSE(accepts("ping", "{\"x\": 1}")) << "an invented key";
  EXPECT_TRUE(accepts("now", "{}"));
  EXPECT_FALSE(accepts("now", "{\"x\": 1}")) << "an invented key";
  EXPECT_TRUE(accepts("tag", "{\"x\": \"y\"}")) << "a declared map";
  EXPECT_EQ(tool_arguments_schema(json::parse(R"({"type": "object"})"))["additionalProperties"], false);
  const json open = json::parse(R"({"type": "object", "additionalProperties": true})");
  EXPECT_EQ(tool_arguments_schema(open), open);  // the schema's own choice stands
  EXPECT_EQ(tool_arguments_schema(json::parse(R"({"type": "string"})")), json::parse(R"({"type": "string"})"));
}

// The reply shaper: a choice's text, fed a character per event, comes out as typed parts
// (answer text, then each call as begin/arguments/end, indexed), whatever the split.
struct Shaped {
  std::string text;                                        // the answer text of every part
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  std::vector<int32_t> indexes;                            // of each call's begin
  FinishReason finish = FinishReason::kNone;
};

Shaped shape_by_character(const ReplyFormat& format, const std::string& text, FinishReason reason) {
  ReplyShaper shaper(format);
  Shaped out;
  for (size_t i = 0; i <= text.size(); ++i) {
    StreamEvent ev;
    ev.finished = i == text.size();
    if (!ev.finished) ev.text = text.substr(i, 1);
    if (ev.finished) ev.finish_reason = reason;
    shaper.shape(ev);
    for (const OutputPart& p : ev.parts) {
      if (p.kind == PartKind::kText) out.text += p.text;
      if (p.kind == PartKind::kToolCallBegin) {
        out.calls.push_back({p.text, ""});
        out.indexes.push_back(p.tool_index);
      }
      if (p.kind == PartKind::kToolCallArguments) out.calls.back().second += p.text;
    }
    if (ev.finished) out.finish = ev.finish_reason;
  }
  return out;
}

const char* const kTwoCalls =
    "Let me check.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>\n"
    "<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1+2\"}}</tool_call>";

TEST(ReplyShaper, CallsBecomeTypedPartsAndTheReplyFinishesWithToolCalls) {
  const ReplyFormat format{true, ToolCallFamily::kHermes, kNames, true};
  const Shaped s = shape_by_character(format, kTwoCalls, FinishReason::kStop);
  EXPECT_EQ(s.text, "Let me check.");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].first, "get_weather");
  EXPECT_EQ(json::parse(s.calls[0].second), json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(s.calls[1].first, "calculator");
  EXPECT_EQ(s.indexes, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(s.finish, FinishReason::kToolCalls);
}

TEST(ReplyShaper, WithoutParallelCallsOnlyTheFirstIsKept) {
  const ReplyFormat format{true, ToolCallFamily::kHermes, kNames, false};
  const Shaped s = shape_by_character(format, kTwoCalls, FinishReason::kStop);
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].first, "get_weather");
  EXPECT_EQ(s.finish, FinishReason::kToolCalls);
}

TEST(ReplyShaper, ACallCutShortIsDroppedAndTheReasonStays) {
  const ReplyFormat format{true, ToolCallFamily::kHermes, kNames, true};
  const Shaped s = shape_by_character(format, "Hmm.<tool_call>{\"name\": \"get_wea", FinishReason::kLength);
  EXPECT_EQ(s.text, "Hmm.");
  EXPECT_TRUE(s.calls.empty());
  EXPECT_EQ(s.finish, FinishReason::kLength);
}

TEST(ReplyShaper, WithoutToolsEveryEventIsAnswerText) {
  const Shaped s = shape_by_character(ReplyFormat{}, kTwoCalls, FinishReason::kStop);
  EXPECT_EQ(s.text, kTwoCalls);
  EXPECT_TRUE(s.calls.empty());
  EXPECT_EQ(s.finish, FinishReason::kStop);
}

}  // namespace
}  // namespace autoglm
