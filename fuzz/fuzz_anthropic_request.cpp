// An Anthropic Messages body (/v1/messages, /count_tokens) -> the chat body it becomes -> the
// typed chat call -> the runtime's Request. Only ParamError (a 400 naming the field) may come
// out, and a field it names is renamed as a Messages field without failing.
#include "server/api/anthropic_request.h"
#include "server/api/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const autoglm::ServerConfig config;
  autoglm::json body;
  try {
    body = autoglm::parse_body(text, config.runtime.limits);
  } catch (const autoglm::ParamError&) {
    return 0;
  }
  const autoglm::SamplingDefaults defaults;
  for (bool count_only : {false, true}) try {
      const autoglm::json chat = autoglm::anthropic_to_chat(body, count_only);
      const autoglm::GenerationCall call = autoglm::parse_generation_call(autoglm::GenerationKind::kChat, chat, config);
      (void)autoglm::runtime_request(call, defaults);
    } catch (const autoglm::ParamError& e) {
      (void)autoglm::anthropic_param(e.param);
    }
  return 0;
}
