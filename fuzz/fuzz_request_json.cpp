// A JSON body -> the typed chat and completion requests -> the engine request and its
// limits check. Only ParamError (a 400 naming the field) may come out.
#include "engine/request_limits.h"
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
  const autoglm::GenerationDefaults defaults;
  const auto check = [&](const autoglm::GenerationParams& params) {
    const auto g = autoglm::engine_request(params, {1, 2, 3}, defaults, 4096);
    autoglm::check_request_limits(g, config.runtime.limits);
  };
  try {
    check(autoglm::parse_chat_request(body, config).params);
  } catch (const autoglm::ParamError&) {
  }
  try {
    check(autoglm::parse_completion_request(body, config).params);
  } catch (const autoglm::ParamError&) {
  }
  return 0;
}
