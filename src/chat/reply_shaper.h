// A choice's generated text as typed parts (autoglm/engine.h's OutputPart): reasoning, answer
// text and the tool calls written in the model family's format. It runs on each event before the
// reader sees it, so every API renders the same parts and none parses text itself.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autoglm/engine.h"
#include "chat/harmony.h"
#include "chat/prompt_builder.h"
#include "chat/reasoning_split.h"
#include "chat/tool_calls.h"

namespace autoglm {

// How a chat request's reply is read: with tools, calls in the family's format.
struct ReplyFormat {
  bool tools = false;  // false: all text is answer text
  ToolCallFamily family = ToolCallFamily::kHermes;
  std::vector<std::string> tool_names;
  bool parallel_tool_calls = true;  // false: calls after the first are dropped
  // A thinking model's reasoning split from its answer (reasoning parts); `starts_thinking`:
  // the prompt opened the thinking, so the text starts inside it.
  bool reasoning = false;
  bool starts_thinking = false;
  // gpt-oss's harmony: one parser reads the whole reply (its analysis channel is the reasoning:
  // reasoning parts when `reasoning`, else answer text).
  bool harmony = false;
  nlohmann::json tool_objects = nlohmann::json::array();           // the OpenAI tools (parameter types)
  bool plain() const { return !tools && !reasoning && !harmony; }  // all text is answer text
};

// How a chat's reply is read: with tools offered (tool_choice not none), calls in `family`'s format.
ReplyFormat reply_format(const PromptRequest& chat, ToolCallFamily family, bool parallel_tool_calls = true);

class ReplyShaper {
 public:
  explicit ReplyShaper(const ReplyFormat& format);
  // Fills event.parts from event.text (text a parser holds back comes with a later event);
  // at the end, a reply that made calls and stopped finishes with kToolCalls.
  void shape(StreamEvent& event);

 private:
  void add_calls(const std::vector<ToolCall>& calls, StreamEvent& event);
  void shape_harmony(StreamEvent& event);
  void add_answer(const std::string& content, const std::vector<ToolCall>& calls, StreamEvent& event);

  bool parallel_;
  std::unique_ptr<ReasoningSplit> reasoning_;  // null unless the reasoning is split off
  std::unique_ptr<ToolCallParser> tools_;      // null without tools
  std::unique_ptr<HarmonyParser> harmony_;     // a harmony reply's parser (instead of both above)
  bool harmony_reasoning_ = false;             // its analysis as reasoning parts (else answer text)
  int32_t calls_ = 0;                          // calls given out
};

}  // namespace autoglm
