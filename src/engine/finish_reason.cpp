#include "autoglm/engine.h"

namespace autoglm {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kToolCalls: return "tool_calls";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kTimeout: return "timeout";
    case FinishReason::kError: return "error";
  }
  return "";
}

}  // namespace autoglm
