// The Anthropic Messages API's request body (POST /v1/messages and /count_tokens) as the chat
// completions body it becomes: system as the system message, content blocks as turns (tool_use
// as the assistant's tool calls, tool_result as tool messages, thinking as reasoning_content),
// tools' input_schema as parameters, tool_choice as chat's, thinking as the template's
// enable_thinking and the thinking budget.
#pragma once

#include <string>

#include "server/api/request_params.h"

namespace autoglm {

// The chat completions body for a Messages body. Throws ParamError naming the Messages field
// ("messages.0.content.1.tool_use_id"). `count_only`: /count_tokens, where max_tokens is not
// asked for.
json anthropic_to_chat(const json& body, bool count_only = false);

// A chat field named in an error as the Messages field it came from ("max_tokens",
// "stop_sequences", "tools.0.input_schema"...).
std::string anthropic_param(const std::string& chat_param);

}  // namespace autoglm
