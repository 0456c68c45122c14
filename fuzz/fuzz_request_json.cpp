// A JSON body -> the typed chat and completion calls -> the runtime's Request, and the limits
// check of what it asks (as Runtime::prepare runs it). Only ParamError (a 400 naming the
// field) may come out.
#include "engine/request.h"
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
  const autoglm::SamplingDefaults defaults;
  const auto check = [&](const autoglm::GenerationCall& call) {
    const autoglm::Request r = autoglm::runtime_request(call, defaults);
    autoglm::GenerationRequest g;
    g.prompt = {1, 2, 3};
    g.max_tokens = r.max_tokens < 0 ? 4093 : r.max_tokens;
    g.sampling = r.sampling;
    g.stop = r.stop;
    g.top_logprobs = r.top_logprobs;
    autoglm::check_request_limits(g, config.runtime.limits);
  };
  for (auto kind : {autoglm::GenerationKind::kChat, autoglm::GenerationKind::kCompletion}) try {
      check(autoglm::parse_generation_call(kind, body, config));
    } catch (const autoglm::ParamError&) {
    }
  return 0;
}
