// What every renderer of a generation counts, whatever API it writes: latency as tokens come,
// each choice's share of usage (the prompt once, every choice's completion), the reply's
// status (the first error's wins) and, once every choice has finished, the request counters.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "autoglm/engine.h"
#include "server/metrics/metrics.h"

namespace autoglm {

class ReplyTally {
 public:
  ReplyTally(RequestMetrics& metrics, size_t choices);

  // One event of choice `index`; a finished one adds the choice's usage and timings. Once
  // every choice has finished, the request is counted and whole() is true.
  void observe(const StreamEvent& event, size_t index);
  bool whole() const { return finished_ == choices_; }

  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t cached_tokens() const { return cached_tokens_; }
  int64_t completion_tokens() const { return completion_tokens_; }
  int status() const { return status_; }
  const std::string& error() const { return error_; }

 private:
  void observe_latency(const StreamEvent& event);
  void finish_choice(const StreamEvent& event, size_t index);

  RequestMetrics& metrics_;
  size_t choices_;
  size_t finished_ = 0;
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0, completion_tokens_ = 0;
  int status_ = 200;
  std::string error_;
  std::chrono::steady_clock::time_point arrival_ = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> last_token_;
};

// The status of a non-streamed generation reply whose last event ended with `reason`.
int http_status_of(FinishReason reason);

}  // namespace autoglm
