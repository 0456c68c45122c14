// Turns a generation's stream events into the OpenAI response: SSE chunks as they come
// (role, content deltas, logprobs, tool-call deltas, the finish chunk, usage, [DONE]) or the
// final JSON body, and the HTTP status of the reply. With tools, the text goes through the
// family's parser first. Observes the latency metrics on the way.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "autoglm/engine.h"
#include "chat/tool_calls.h"
#include "server/metrics.h"
#include "server/request_params.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {

// Bytes to send for one event; `complete` once the reply is whole, then `status` is the
// reply's HTTP status (for a non-streamed reply; a stream has sent 200 up front).
struct ReplyChunk {
  std::string bytes;
  bool complete = false;
  int status = 200;
  int64_t prompt_tokens = 0, completion_tokens = 0;  // once complete (the access log)
};

struct ResponseShape {
  bool chat = true;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  std::string id, model;
  int64_t created = 0;
  // Chat with tools: the request's function names, the family and the call-id prefix.
  std::optional<std::vector<std::string>> tool_names;
  ToolCallFamily family = ToolCallFamily::kHermes;
  std::string call_id_prefix;
  bool parallel_tool_calls = true;
  size_t choices = 1;  // `n`
};

class ResponseWriter {
 public:
  ResponseWriter(ResponseShape shape, const Tokenizer& tokenizer, RequestMetrics& metrics);

  // One event of choice `index`; the reply is complete once every choice has finished.
  ReplyChunk consume(const StreamEvent& event, size_t index = 0);

 private:
  // What one choice has produced so far.
  struct Choice {
    std::unique_ptr<ToolCallParser> tools;
    std::string text;
    json logprob_items = json::array();
    json tool_calls = json::array();
    bool sent_role = false;
    bool finished = false;
    std::string finish_reason;
  };

  std::string content_chunk(size_t index, const std::string& content, const json& items);
  std::string take_tool_calls(size_t index, const std::vector<ToolCall>& calls);
  std::string finish_choice(size_t index, const StreamEvent& last, const std::string& content,
                            const std::vector<ToolCall>& calls);
  ReplyChunk finish_reply();
  json choice_delta(size_t index, const std::string& text, const json& logprobs, const json& finish) const;
  json chunk_envelope() const;
  json logprobs_json(const json& items, size_t text_offset = 0) const;
  json usage() const;
  void observe_latency(const StreamEvent& event);

  ResponseShape shape_;
  const Tokenizer& tokenizer_;
  RequestMetrics& metrics_;
  std::vector<Choice> choices_;
  size_t finished_ = 0;
  // Usage as OpenAI sums it: the prompt once, the completions of every choice.
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0, completion_tokens_ = 0;
  int status_ = 200;  // the first error's status wins
  std::string error_;
  std::chrono::steady_clock::time_point arrival_ = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> last_token_;
};

// The status of a non-streamed generation reply whose last event ended with `reason`.
int http_status_of(FinishReason reason);

}  // namespace autoglm
