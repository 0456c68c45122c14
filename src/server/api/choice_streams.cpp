#include "server/api/choice_streams.h"

namespace autoglm {

ChoiceStreams::ChoiceStreams(std::shared_ptr<StreamHandle> first, size_t n, Submit submit)
    : n_(n), submit_(std::move(submit)) {
  handles_.push_back(std::move(first));
  choice_of_.push_back(0);
}

void ChoiceStreams::set_notify(std::function<void()> notify) {
  notify_ = std::move(notify);
  for (auto& h : handles_) h->set_notify(notify_);
}

// Choice 0 has its first token (or ended without one: then the others end as it did).
void ChoiceStreams::submit_the_rest(const StreamEvent& first) {
  first_token_seen_ = true;
  const bool failed_early = first.finished && first.tokens.empty() && first.finish_reason == FinishReason::kError;
  for (size_t i = 1; i < n_; ++i) {
    Result<std::shared_ptr<StreamHandle>> handle =
        failed_early ? Result<std::shared_ptr<StreamHandle>>(invalid_argument(first.error)) : submit_(i);
    if (handle) {
      if (cancelled_) (*handle)->cancel();
      (*handle)->set_notify(notify_);
      handles_.push_back(*handle);
      choice_of_.push_back(i);
      continue;
    }
    StreamEvent ev;
    ev.finished = true;
    ev.finish_reason = FinishReason::kError;
    ev.error = handle.status().message();
    failed_.emplace_back(i, std::move(ev));
  }
}

bool ChoiceStreams::try_next(StreamEvent& event, size_t& index) {
  if (!failed_.empty()) {
    index = failed_.back().first;
    event = std::move(failed_.back().second);
    failed_.pop_back();
    return true;
  }
  for (size_t tried = 0; tried < handles_.size(); ++tried) {  // round robin over the choices
    const size_t k = (next_ + tried) % handles_.size();
    if (!handles_[k]->try_next(event)) continue;
    next_ = k + 1;
    index = choice_of_[k];
    if (index == 0 && n_ > 1 && !first_token_seen_ && (!event.tokens.empty() || event.finished)) submit_the_rest(event);
    return true;
  }
  return false;
}

void ChoiceStreams::cancel() {
  cancelled_ = true;
  for (auto& h : handles_) h->cancel();
}

}  // namespace autoglm
