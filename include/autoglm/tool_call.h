// A function call the model asked for, parsed out of its reply (OpenAI's tool_calls entries).
#pragma once

#include <string>
#include <vector>

namespace autoglm {

// Whether a chat's tools are offered and a call is forced (OpenAI's tool_choice).
enum class ToolChoice {
  kNone,      // tools are not shown to the model
  kAuto,      // shown; the model may call one
  kRequired,  // a call to one of them is forced
  kNamed,     // a call to the named one is forced
};

struct ToolCall {
  std::string id;  // "call_..."
  std::string name;
  std::string arguments;  // JSON text
};

// The tool-call formats RuntimeOptions::tool_call_format may name: hermes, llama3, glm4, glm45,
// glm47, qwen3coder, deepseek_v3_1, harmony.
std::vector<std::string> tool_call_format_names();

// A generated reply split into its text and the calls it made.
struct AssistantMessage {
  std::string content;
  std::vector<ToolCall> tool_calls;
};

}  // namespace autoglm
