// A function call the model asked for, parsed out of its reply (OpenAI's tool_calls entries).
#pragma once

#include <string>
#include <vector>

namespace autoglm {

struct ToolCall {
  std::string id;  // "call_..."
  std::string name;
  std::string arguments;  // JSON text
};

// A generated reply split into its text and the calls it made.
struct AssistantMessage {
  std::string content;
  std::vector<ToolCall> tool_calls;
};

}  // namespace autoglm
