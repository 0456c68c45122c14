// What Runtime::prepare makes of a public Request: the engine's request (prompt rendered,
// constraint compiled, adapters held) and how its reply is read.
#pragma once

#include <string>

#include "autoglm/runtime.h"
#include "chat/prompt_builder.h"
#include "chat/reply_shaper.h"
#include "engine/request.h"

namespace autoglm {

struct PreparedRequest::State {
  const Runtime::Parts* owner = nullptr;  // the runtime it was made for
  GenerationRequest request;              // make_shaper set when the reply has a format
  ReplyFormat format;
  std::string prompt_field;  // "messages" or "prompt": what submit's errors about the prompt name
};

// A public Conversation as the prompt builder takes it; errors name the field.
Result<PromptRequest> prompt_request(const Conversation& chat, const RequestLimits& limits);

}  // namespace autoglm
