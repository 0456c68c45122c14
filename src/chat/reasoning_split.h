// A thinking model's text split into its reasoning and its answer, as it streams: what lies
// between <think> and </think> is reasoning, the rest answer text. A marker cut across two
// pieces is held back until the next piece says what it is, so the split is the same at every
// byte boundary.
#pragma once

#include <string>

namespace autoglm {

class ReasoningSplit {
 public:
  struct Output {
    std::string reasoning, content;
  };
  // `thinking`: the prompt already opened the thinking (it ends with <think>), so the text
  // starts inside it.
  explicit ReasoningSplit(bool thinking = false);
  Output push(const std::string& piece);
  // The text held back: inside an unclosed thinking it is reasoning (a reply cut short keeps
  // what it thought), else answer text.
  Output finish();

 private:
  enum class State {
    kStart,     // nothing but whitespace yet: a <think> may still open
    kThinking,  // inside <think>
    kAfter,     // </think> seen: whitespace before the answer is dropped
    kAnswer,    // answer text
  };
  void step(Output& out);

  State state_;
  std::string held_;  // text not yet decided (a marker's possible start)
};

// Whether a chat template marks thinking (its text has <think>), and whether a rendered prompt
// ends inside an opened thinking (its generation prompt wrote <think>).
bool template_thinks(const std::string& template_source);
bool prompt_opens_thinking(const std::string& prompt_text);
// Whether a rendered prompt ends with a closed, empty thinking (thinking switched off:
// "<think></think>").
bool prompt_closes_thinking(const std::string& prompt_text);
// The markers that open and close the thinking.
inline constexpr const char* kThinkOpen = "<think>";
inline constexpr const char* kThinkClose = "</think>";

}  // namespace autoglm
