// gpt-oss's harmony format, as a reply streams: messages of a header (<|channel|>NAME, a
// recipient "to=functions.NAME", a content type after <|constrain|>) and a body after
// <|message|>, each ended by <|end|> (or the end of generation: <|call|> and <|return|> end it
// as end-of-generation tokens). The analysis channel is reasoning, final (and commentary to
// nobody, a preamble) is answer text, a message to functions.NAME is a call whose body is its
// arguments. Text that is no harmony at all is answer text. The split is the same at every
// byte boundary: a marker cut across pieces is held back until the next piece says what it is.
#pragma once

#include <string>
#include <vector>

#include "autoglm/tool_call.h"

namespace autoglm {

class HarmonyParser {
 public:
  struct Output {
    std::string reasoning, content;
    std::vector<ToolCall> calls;  // completed by this text
  };
  explicit HarmonyParser(std::string id_prefix = "") : id_prefix_(std::move(id_prefix)) {}
  Output push(const std::string& text);
  // End of generation: a call's body ends here (<|call|> ended it). `cut_short` (max_tokens): an
  // unfinished call is dropped rather than given with partial arguments.
  Output finish(bool cut_short = false);
  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  enum class State { kStart, kHeader, kBody, kPlain };
  enum class Body { kReasoning, kContent, kCall };
  void step(Output& out, bool final);
  bool take_header(Output& out, bool final);
  void take_body(Output& out, bool final);
  void end_call(Output& out);

  std::string id_prefix_;
  State state_ = State::kStart;
  Body body_ = Body::kContent;
  std::string held_;       // text not yet decided
  std::string call_name_;  // the open call's function
  std::string arguments_;  // its body so far
  std::vector<ToolCall> calls_;
};

// Whether a chat template writes harmony (gpt-oss's): its messages have <|channel|>.
bool template_is_harmony(const std::string& template_source);

// The control tokens of harmony's markers, which a reply must show for HarmonyParser to read.
inline constexpr const char* kHarmonyMarkers[] = {"<|start|>",     "<|channel|>", "<|message|>", "<|end|>",
                                                  "<|constrain|>", "<|call|>",    "<|return|>"};

}  // namespace autoglm
