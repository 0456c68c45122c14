// The serving engine's public face: submit a request, read its stream.
// One engine thread owns the scheduler, the KV cache and the model runner;
// callers only touch the submit queue and their stream handles.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/settings.h"
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

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};

// What a choice's output is made of. A chat request with tools has its text split into
// answer text and calls (in the model family's own format, parsed below the API); thinking
// models add reasoning. Every event's `parts` say what its text was; renderers of the
// OpenAI, Responses (and other) APIs read the parts and never parse text themselves.
enum class PartKind {
  kText,               // answer text
  kReasoning,          // thinking text
  kToolCallBegin,      // a call starts: `text` is the function's name
  kToolCallArguments,  // a piece of the call's arguments (JSON text)
  kToolCallEnd,        // the call is complete
};

// "text", "reasoning", "tool_call_begin", "tool_call_arguments", "tool_call_end".
const char* part_kind_name(PartKind kind);

struct OutputPart {
  PartKind kind = PartKind::kText;
  std::string text;
  int32_t tool_index = 0;  // the call's place among the choice's calls (0, 1, ...)
};

// What the engine tells a request: text as it becomes final, then one last event.
struct StreamEvent {
  std::string text;               // what the model wrote since the last event
  std::vector<OutputPart> parts;  // the same, typed (text held back by a parser comes later)
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string stop_sequence;  // final event: the stop string that ended it ("" for an end token)
  std::string error;
  int32_t prompt_tokens = 0;  // the first token's event and the final one
  int32_t cached_tokens = 0;  // prompt tokens whose KV came from the prefix cache (the same events)
  int32_t completion_tokens = 0;
  double queue_seconds = 0;    // final event: arrival to first scheduled step
  double prefill_seconds = 0;  // final event: first scheduled step to first token
  int32_t preemptions = 0;     // final event: times this request was preempted
  // Final event, under speculative decoding: tokens drafted, and those the model accepted
  // (each decoding pass gives one token more than it accepted).
  int64_t spec_drafted = 0, spec_accepted = 0;
};

// A request's events, as the caller reads them. Opaque: only the library writes to it.
class StreamHandle {
 public:
  ~StreamHandle();
  StreamHandle(const StreamHandle&) = delete;
  StreamHandle& operator=(const StreamHandle&) = delete;

  // Blocks until an event arrives (or the timeout passes: false).
  bool next(StreamEvent& event, std::chrono::milliseconds timeout = std::chrono::hours(24));
  // Takes an event if one is there, without waiting.
  bool try_next(StreamEvent& event);
  // Called (on the engine thread) after each new event; for callers that must not block.
  void set_notify(std::function<void()> notify);
  // Asks the engine to stop this request; it ends within one step with "cancelled".
  void cancel();
  bool cancelled() const;

  // Streams the caller fills instead of an engine. `recorded`: one that already holds these
  // events (a cached reply replayed). `relay`: an empty one and the function that appends to
  // it, in order, the last event with `finished` set (events relayed from other streams).
  static std::shared_ptr<StreamHandle> recorded(const std::vector<StreamEvent>& events);
  using Append = std::function<void(StreamEvent)>;
  static std::pair<std::shared_ptr<StreamHandle>, Append> relay();

  struct State;  // the queue the library writes (src/engine/stream.h)

 private:
  explicit StreamHandle(std::unique_ptr<State> state);
  friend struct StreamWriter;
  std::unique_ptr<State> state_;
};

}  // namespace autoglm
