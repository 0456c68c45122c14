// The one check of a generation request against the per-request limits, used by the engine
// on every submit and by the server first (to answer a 400 naming the field).
#pragma once

#include <optional>
#include <string>

#include "autoglm/limits.h"
#include "engine/request.h"

namespace autoglm {

struct LimitViolation {
  std::string param;    // the request field: "prompt", "stop", "top_logprobs"
  std::string message;  // names the limit too
};

std::optional<LimitViolation> check_request_limits(const GenerationRequest& request, const RequestLimits& limits);

}  // namespace autoglm
