#include "engine/request_limits.h"

namespace autoglm {

std::optional<LimitViolation> check_request_limits(const GenerationRequest& r, const RequestLimits& limits) {
  const auto n = [](auto v) { return std::to_string(v); };
  if (limits.prompt_tokens > 0 && int64_t(r.prompt.size()) > limits.prompt_tokens)
    return LimitViolation{"prompt", "the prompt has " + n(r.prompt.size()) + " tokens, over the limit of " +
                                        n(limits.prompt_tokens) + " (limit prompt_tokens)"};
  if (int64_t(r.stop.size()) > limits.stop_strings)
    return LimitViolation{"stop", "'stop' holds " + n(r.stop.size()) + " strings, over the limit of " +
                                      n(limits.stop_strings) + " (limit stop_strings)"};
  for (const std::string& s : r.stop) {
    if (int64_t(s.size()) > limits.stop_string_bytes)
      return LimitViolation{"stop", "'stop' holds a string of " + n(s.size()) + " bytes, over the limit of " +
                                        n(limits.stop_string_bytes) + " (limit stop_string_bytes)"};
  }
  if (r.top_logprobs > limits.top_logprobs)
    return LimitViolation{"top_logprobs", "'top_logprobs' is " + n(r.top_logprobs) + ", over the limit of " +
                                              n(limits.top_logprobs) + " (limit top_logprobs)"};
  return std::nullopt;
}

}  // namespace autoglm
