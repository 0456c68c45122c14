// The serving engine's public face: submit a request, read its stream.
// One engine thread owns the scheduler, the KV cache and the model runner;
// callers only touch the submit queue and their stream handles.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/status.h"

namespace autoglm {

// Why a generation ended. The wire names ("stop", "length", "tool_calls", "cancelled",
// "timeout", "error") come from finish_reason_name alone.
enum class FinishReason {
  kNone,       // not finished
  kStop,       // an end-of-generation token or a stop string (or the grammar is complete)
  kLength,     // max_tokens or the context window
  kToolCalls,  // the API found tool calls in the text (set above the engine)
  kCancelled,  // the caller cancelled, or the engine stopped
  kTimeout,    // waited past its deadline before it started
  kError,      // a failure; `error` says which
};
inline constexpr int kFinishReasonCount = int(FinishReason::kError) + 1;
const char* finish_reason_name(FinishReason reason);

// How an embedding is made from a sequence's final hidden states (then L2-normalised).
enum class Pooling {
  kLast,  // the last token's (decoder embedding models: Qwen3-Embedding, e5-mistral)
  kMean,  // the mean over the tokens
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};

// What the engine tells a request: text as it becomes final, then one last event.
struct StreamEvent {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens whose KV came from the prefix cache
  int32_t completion_tokens = 0;
  double queue_seconds = 0;    // final event: arrival to first scheduled step
  double prefill_seconds = 0;  // final event: first scheduled step to first token
  int32_t preemptions = 0;     // final event: times this request was preempted
};

class StreamHandle {
 public:
  // Blocks until an event arrives (or the timeout passes: false).
  bool next(StreamEvent& event, std::chrono::milliseconds timeout = std::chrono::hours(24));
  // Takes an event if one is there, without waiting.
  bool try_next(StreamEvent& event);
  // Called (on the engine thread) after each new event; for callers that must not block.
  void set_notify(std::function<void()> notify);
  // Asks the engine to stop this request; it ends within one step with "cancelled".
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  // Engine side.
  void push(StreamEvent event);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamEvent> events_;
  std::function<void()> notify_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace autoglm
