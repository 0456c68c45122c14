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

const char* part_kind_name(PartKind kind) {
  switch (kind) {
    case PartKind::kText: return "text";
    case PartKind::kReasoning: return "reasoning";
    case PartKind::kToolCallBegin: return "tool_call_begin";
    case PartKind::kToolCallArguments: return "tool_call_arguments";
    case PartKind::kToolCallEnd: return "tool_call_end";
  }
  return "text";
}

}  // namespace autoglm
