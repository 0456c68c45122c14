#include "chat/reply_shaper.h"

namespace autoglm {

ReplyFormat reply_format(const PromptRequest& chat, ToolCallFamily family, bool parallel_tool_calls) {
  ReplyFormat f;
  if (chat.tool_choice == ToolChoice::kNone || chat.tools.empty()) return f;
  f.tools = true;
  f.family = family;
  f.tool_names = tool_function_names(chat.tools);
  f.tool_objects = nlohmann::json(chat.tools);
  f.parallel_tool_calls = parallel_tool_calls;
  return f;
}

ReplyShaper::ReplyShaper(const ReplyFormat& format) : parallel_(format.parallel_tool_calls) {
  if (format.harmony) {
    harmony_ = std::make_unique<HarmonyParser>();
    harmony_reasoning_ = format.reasoning;
    return;
  }
  if (format.reasoning) reasoning_ = std::make_unique<ReasoningSplit>(format.starts_thinking);
  if (format.tools) {
    tools_ = std::make_unique<ToolCallParser>(format.family, format.tool_names, "");
    tools_->set_tools(format.tool_objects);
  }
}

void ReplyShaper::add_calls(const std::vector<ToolCall>& calls, StreamEvent& event) {
  for (const ToolCall& call : calls) {
    if (!parallel_ && calls_ > 0) return;
    event.parts.push_back({PartKind::kToolCallBegin, call.name, calls_});
    event.parts.push_back({PartKind::kToolCallArguments, call.arguments, calls_});
    event.parts.push_back({PartKind::kToolCallEnd, "", calls_});
    ++calls_;
  }
}

void ReplyShaper::shape_harmony(StreamEvent& event) {
  HarmonyParser::Output out = harmony_->push(event.text);
  if (event.finished) {
    HarmonyParser::Output rest = harmony_->finish(event.finish_reason == FinishReason::kLength);
    out.reasoning += rest.reasoning;
    out.content += rest.content;
    out.calls.insert(out.calls.end(), rest.calls.begin(), rest.calls.end());
  }
  if (!out.reasoning.empty())
    event.parts.push_back({harmony_reasoning_ ? PartKind::kReasoning : PartKind::kText, out.reasoning, 0});
  add_answer(out.content, out.calls, event);
}

// The answer's text, then its calls; a reply that made calls and stopped ends with kToolCalls.
void ReplyShaper::add_answer(const std::string& content, const std::vector<ToolCall>& calls, StreamEvent& event) {
  if (!content.empty()) event.parts.push_back({PartKind::kText, content, 0});
  add_calls(calls, event);
  if (event.finished && calls_ > 0 && event.finish_reason == FinishReason::kStop)
    event.finish_reason = FinishReason::kToolCalls;
}

// The reasoning split off first (the calls are in the answer), then the answer read for calls.
void ReplyShaper::shape(StreamEvent& event) {
  if (harmony_) return shape_harmony(event);
  std::string answer = event.text;
  if (reasoning_) {
    ReasoningSplit::Output split = reasoning_->push(event.text);
    if (event.finished) {
      ReasoningSplit::Output rest = reasoning_->finish();
      split.reasoning += rest.reasoning;
      split.content += rest.content;
    }
    if (!split.reasoning.empty()) event.parts.push_back({PartKind::kReasoning, split.reasoning, 0});
    answer = std::move(split.content);
  }
  if (!tools_) {
    if (!answer.empty()) event.parts.push_back({PartKind::kText, answer, 0});
    return;
  }
  ToolCallParser::Output out = tools_->push(answer);
  if (event.finished) {
    ToolCallParser::Output rest = tools_->finish(event.finish_reason == FinishReason::kLength);
    out.content += rest.content;
    out.calls.insert(out.calls.end(), rest.calls.begin(), rest.calls.end());
  }
  add_answer(out.content, out.calls, event);
}

}  // namespace autoglm
