#include "chat/harmony.h"

#include <algorithm>
#include <string_view>

#include "chat/partial_marker.h"

namespace autoglm {
namespace {

constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kBodyEnds[] = {"<|end|>", "<|call|>", "<|return|>"};

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// The word after `key` in a header ("analysis" after <|channel|>, "functions.f" after "to="):
// up to whitespace or the next marker.
std::string word_after(const std::string& header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string::npos) return "";
  size_t i = at + key.size(), end = i;
  while (end < header.size() && !is_space(header[end]) && header.compare(end, 2, "<|") != 0) ++end;
  return header.substr(i, end - i);
}

}  // namespace

bool template_is_harmony(const std::string& source) {
  return source.find("<|channel|>") != std::string::npos && source.find("<|message|>") != std::string::npos;
}

HarmonyParser::Output HarmonyParser::push(const std::string& text) {
  Output out;
  held_ += text;
  step(out, false);
  return out;
}

HarmonyParser::Output HarmonyParser::finish(bool cut_short) {
  Output out;
  step(out, true);
  if (state_ == State::kBody && body_ == Body::kCall) {
    if (!cut_short) end_call(out);  // <|call|> ended generation: the call is whole
    call_name_.clear();
    arguments_.clear();
  }
  held_.clear();
  return out;
}

void HarmonyParser::step(Output& out, bool final) {
  for (;;) {
    if (state_ == State::kStart) {
      const size_t first = held_.find_first_not_of(" \t\r\n");
      if (first == std::string::npos) {
        if (final) held_.clear();
        return;
      }
      const std::string_view rest = std::string_view(held_).substr(first);
      const bool could_be = rest.substr(0, std::min(rest.size(), kChannel.size())) ==
                                kChannel.substr(0, std::min(rest.size(), kChannel.size())) ||
                            rest.substr(0, std::min(rest.size(), kStart.size())) ==
                                kStart.substr(0, std::min(rest.size(), kStart.size()));
      if (!could_be) {
        state_ = State::kPlain;
      } else if (rest.size() < std::max(kChannel.size(), kStart.size()) && !final) {
        return;  // too short yet to tell
      } else {
        held_.erase(0, first);
        state_ = State::kHeader;
      }
      continue;
    }
    if (state_ == State::kPlain) {
      out.content += held_;
      held_.clear();
      return;
    }
    if (state_ == State::kHeader) {
      if (!take_header(out, final)) return;
      continue;
    }
    take_body(out, final);
    if (state_ == State::kBody) return;
  }
}

// A header up to <|message|>: its channel and recipient choose what the body is.
bool HarmonyParser::take_header(Output& out, bool final) {
  const size_t at = held_.find(kMessage);
  if (at == std::string::npos) {
    if (final) held_.clear();  // a header cut off: nothing to show
    return false;
  }
  const std::string header = held_.substr(0, at);
  held_.erase(0, at + kMessage.size());
  const std::string channel = word_after(header, kChannel), recipient = word_after(header, "to=");
  if (recipient.rfind("functions.", 0) == 0) {
    body_ = Body::kCall;
    call_name_ = recipient.substr(10);
    arguments_.clear();
  } else {
    body_ = channel == "analysis" ? Body::kReasoning : Body::kContent;
  }
  (void)out;
  state_ = State::kBody;
  return true;
}

// A body up to its end marker; reasoning and text are released as they come.
void HarmonyParser::take_body(Output& out, bool final) {
  size_t end = std::string::npos, marker = 0;
  for (std::string_view m : kBodyEnds) {
    const size_t at = held_.find(m);
    if (at < end) end = at, marker = m.size();
  }
  size_t release = end;
  if (end == std::string::npos) {
    size_t hold = 0;
    if (!final)
      for (std::string_view m : kBodyEnds) hold = std::max(hold, partial_marker(held_, m));
    release = held_.size() - hold;
  }
  const std::string piece = held_.substr(0, release);
  if (body_ == Body::kReasoning) out.reasoning += piece;
  if (body_ == Body::kContent) out.content += piece;
  if (body_ == Body::kCall) arguments_ += piece;
  held_.erase(0, end == std::string::npos ? release : end + marker);
  if (end == std::string::npos) return;
  if (body_ == Body::kCall) end_call(out);
  state_ = State::kStart;  // the next message's header
}

void HarmonyParser::end_call(Output& out) {
  ToolCall call;
  call.id = id_prefix_ + std::to_string(calls_.size());
  call.name = call_name_;
  const size_t b = arguments_.find_first_not_of(" \t\r\n"), e = arguments_.find_last_not_of(" \t\r\n");
  call.arguments = b == std::string::npos ? "{}" : arguments_.substr(b, e - b + 1);
  calls_.push_back(call);
  out.calls.push_back(std::move(call));
  call_name_.clear();
  arguments_.clear();
}

}  // namespace autoglm
