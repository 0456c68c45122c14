#include "chat/reasoning_split.h"

#include <string_view>

#include "autoglm/settings.h"
#include "chat/partial_marker.h"

namespace autoglm {
namespace {

constexpr std::string_view kOpen = kThinkOpen;
constexpr std::string_view kClose = kThinkClose;

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

}  // namespace

Result<ReasoningFormat> reasoning_format_from_name(std::string_view name) {
  if (name == "auto") return ReasoningFormat::kAuto;
  if (name == "none") return ReasoningFormat::kNone;
  if (name == "deepseek") return ReasoningFormat::kDeepseek;
  return invalid_argument("reasoning_format: '" + std::string(name) + "' is not auto, none or deepseek");
}

const char* reasoning_format_name(ReasoningFormat format) {
  switch (format) {
    case ReasoningFormat::kAuto: return "auto";
    case ReasoningFormat::kNone: return "none";
    case ReasoningFormat::kDeepseek: return "deepseek";
  }
  return "auto";
}

ReasoningSplit::ReasoningSplit(bool thinking) : state_(thinking ? State::kThinking : State::kStart) {}

ReasoningSplit::Output ReasoningSplit::push(const std::string& piece) {
  held_ += piece;
  Output out;
  step(out);
  return out;
}

// Moves what held_ decides into `out`, leaving only an undecided tail.
void ReasoningSplit::step(Output& out) {
  for (;;) {
    if (state_ == State::kStart) {
      size_t i = 0;
      while (i < held_.size() && is_space(held_[i])) ++i;
      const std::string_view rest = std::string_view(held_).substr(i);
      if (rest.size() >= kOpen.size() && rest.substr(0, kOpen.size()) == kOpen) {
        held_.erase(0, i + kOpen.size());
        state_ = State::kThinking;
        continue;
      }
      if (rest.empty() || kOpen.substr(0, rest.size()) == rest) return;  // may still open
      state_ = State::kAnswer;                                           // no thinking: all of it is the answer
      continue;
    }
    if (state_ == State::kThinking) {
      const size_t close = held_.find(kClose);
      if (close == std::string::npos) {
        const size_t keep = partial_marker(held_, kClose);
        out.reasoning += held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return;
      }
      out.reasoning += held_.substr(0, close);
      held_.erase(0, close + kClose.size());
      state_ = State::kAfter;
      continue;
    }
    if (state_ == State::kAfter) {
      size_t i = 0;
      while (i < held_.size() && is_space(held_[i])) ++i;
      held_.erase(0, i);
      if (held_.empty()) return;
      state_ = State::kAnswer;
      continue;
    }
    out.content += held_;
    held_.clear();
    return;
  }
}

ReasoningSplit::Output ReasoningSplit::finish() {
  Output out;
  if (state_ == State::kThinking)
    out.reasoning = held_;
  else if (state_ != State::kAfter)
    out.content = held_;
  held_.clear();
  return out;
}

bool template_thinks(const std::string& template_source) {
  return template_source.find(kOpen) != std::string::npos;
}

namespace {

// The prompt without its trailing whitespace ends with `marker`.
bool prompt_ends_with(const std::string& prompt_text, std::string_view marker) {
  size_t end = prompt_text.size();
  while (end > 0 && is_space(prompt_text[end - 1])) --end;
  const std::string_view text = std::string_view(prompt_text).substr(0, end);
  return text.size() >= marker.size() && text.substr(text.size() - marker.size()) == marker;
}

}  // namespace

bool prompt_opens_thinking(const std::string& prompt_text) {
  return prompt_ends_with(prompt_text, kOpen);
}

bool prompt_closes_thinking(const std::string& prompt_text) {
  return prompt_ends_with(prompt_text, kClose);
}

}  // namespace autoglm
