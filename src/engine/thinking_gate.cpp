#include "engine/thinking_gate.h"

#include <algorithm>

namespace autoglm {

ThinkingGate::ThinkingGate(const std::optional<ThinkingSpec>& spec) {
  if (!spec || spec->open.empty() || spec->close.empty()) return;
  open_ = spec->open;
  close_ = spec->close;
  budget_ = spec->budget;
  constraint_after_ = spec->constraint_after;
  phase_ = spec->starts_closed ? Phase::kAnswer : spec->starts_inside ? Phase::kThinking : Phase::kBefore;
  if (phase_ == Phase::kThinking && budget_ == 0) forced_.assign(close_.begin(), close_.end());
}

std::optional<int32_t> ThinkingGate::forced() const {
  if (forced_.empty()) return std::nullopt;
  return forced_.front();
}

int32_t ThinkingGate::also_allowed() const {
  return phase_ == Phase::kBefore && constraint_after_ && open_matched_ == 0 ? open_[0] : -1;
}

bool ThinkingGate::ends_with_close() const {
  return recent_.size() >= close_.size() && std::equal(close_.begin(), close_.end(), recent_.end() - close_.size());
}

void ThinkingGate::accept(int32_t token, bool blank) {
  const bool was_forced = !forced_.empty() && forced_.front() == token;
  if (was_forced) forced_.pop_front();
  if (phase_ == Phase::kBefore) {
    if (token == open_[open_matched_]) {
      // A constrained sample took the marker's first token: the grammar would refuse the rest.
      if (open_matched_ == 0 && constraint_after_) forced_.assign(open_.begin() + 1, open_.end());
      if (++open_matched_ == open_.size()) {
        phase_ = Phase::kThinking;
        if (budget_ == 0) forced_.assign(close_.begin(), close_.end());
      }
    } else if (!(blank && open_matched_ == 0)) {
      phase_ = Phase::kAnswer;
    }
    return;
  }
  if (phase_ != Phase::kThinking) return;
  recent_.push_back(token);
  if (recent_.size() > close_.size()) recent_.erase(recent_.begin());
  if (ends_with_close()) {
    phase_ = Phase::kAnswer;
    forced_.clear();
    return;
  }
  if (!was_forced) ++thought_;
  if (budget_ >= 0 && thought_ >= budget_ && forced_.empty()) {
    // The budget is spent: the close marker follows (what of it was already written counts).
    size_t have = 0;
    for (size_t n = std::min(recent_.size(), close_.size() - 1); n > 0; --n)
      if (std::equal(close_.begin(), close_.begin() + n, recent_.end() - n)) {
        have = n;
        break;
      }
    forced_.assign(close_.begin() + have, close_.end());
  }
}

}  // namespace autoglm
