// A reply shaped as it streams in two pieces cut at a byte (ReplyShaper), its typed parts
// gathered: what tests of reasoning and tool-call formats check at every cut.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "chat/reply_shaper.h"

namespace autoglm::test {

struct ShapedReply {
  std::string reasoning, answer;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  FinishReason finish = FinishReason::kNone;
};

// `text` in two events cut at `cut`, the second finishing with `reason`.
inline ShapedReply shape_at_cut(const ReplyFormat& format, const std::string& text, size_t cut,
                                FinishReason reason = FinishReason::kStop) {
  ReplyShaper shaper(format);
  StreamEvent a, b;
  a.text = text.substr(0, cut);
  b.text = text.substr(cut);
  b.finished = true;
  b.finish_reason = reason;
  shaper.shape(a);
  shaper.shape(b);
  ShapedReply out;
  for (const StreamEvent* ev : {&a, &b})
    for (const OutputPart& p : ev->parts) {
      if (p.kind == PartKind::kReasoning) out.reasoning += p.text;
      if (p.kind == PartKind::kText) out.answer += p.text;
      if (p.kind == PartKind::kToolCallBegin) out.calls.emplace_back(p.text, "");
      if (p.kind == PartKind::kToolCallArguments && !out.calls.empty()) out.calls.back().second += p.text;
    }
  out.finish = b.finish_reason;
  return out;
}

}  // namespace autoglm::test
