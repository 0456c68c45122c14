#include "server/api/reply_tally.h"

#include <algorithm>

namespace autoglm {

using Clock = std::chrono::steady_clock;

int http_status_of(FinishReason reason) {
  switch (reason) {
    case FinishReason::kError: return 500;
    case FinishReason::kTimeout: return 408;
    default: return 200;
  }
}

ReplyTally::ReplyTally(RequestMetrics& metrics, size_t choices)
    : metrics_(metrics), choices_(std::max<size_t>(1, choices)) {}

void ReplyTally::observe(const StreamEvent& ev, size_t index) {
  observe_latency(ev);
  if (!ev.finished) return;
  finish_choice(ev, index);
  if (!whole()) return;
  ++metrics_.requests;
  if (status_ != 200) ++metrics_.errors;
  metrics_.prompt_tokens += uint64_t(prompt_tokens_);
  metrics_.completion_tokens += uint64_t(completion_tokens_);
}

void ReplyTally::observe_latency(const StreamEvent& ev) {
  if (ev.tokens.empty()) return;
  const auto now = Clock::now();
  if (!last_token_)
    metrics_.time_to_first_token.observe(std::chrono::duration<double>(now - arrival_).count());
  else
    metrics_.inter_token_latency.observe(std::chrono::duration<double>(now - *last_token_).count());
  last_token_ = now;
}

void ReplyTally::finish_choice(const StreamEvent& ev, size_t index) {
  ++finished_;
  if (index == 0 || prompt_tokens_ == 0) prompt_tokens_ = ev.prompt_tokens;
  if (index == 0) cached_tokens_ = ev.cached_tokens;
  completion_tokens_ += ev.completion_tokens;
  if (status_ == 200) status_ = http_status_of(ev.finish_reason);
  if (error_.empty()) error_ = ev.error;
  metrics_.e2e_latency.observe(std::chrono::duration<double>(Clock::now() - arrival_).count());
  metrics_.queue_time.observe(ev.queue_seconds);
  if (ev.completion_tokens > 0) metrics_.prefill_time.observe(ev.prefill_seconds);
}

}  // namespace autoglm
