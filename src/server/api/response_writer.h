// Renders a generation's typed events (autoglm/engine.h's parts) as the OpenAI chat or
// completions response: SSE chunks as they come (role, content deltas, logprobs, tool-call
// deltas, the finish chunk, usage, [DONE]) or the final JSON body, and the HTTP status of the
// reply. Observes the latency metrics on the way.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "autoglm/engine.h"
#include "autoglm/runtime.h"
#include "server/api/reply_tally.h"
#include "server/api/request_params.h"
#include "server/metrics/metrics.h"

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
  std::string call_id_prefix;  // chat with tools: calls are named prefix + index
  size_t choices = 1;          // `n`
};

class ResponseWriter {
 public:
  // `tokenizer`: the model's, for the logprobs' token text.
  ResponseWriter(ResponseShape shape, const Runtime& tokenizer, RequestMetrics& metrics);

  // One event of choice `index`; the reply is complete once every choice has finished.
  ReplyChunk consume(const StreamEvent& event, size_t index = 0);

 private:
  // What one choice has produced so far.
  struct Choice {
    std::string text;
    std::string reasoning;  // a thinking model's, apart from the answer (reasoning_content)
    json logprob_items = json::array();
    json tool_calls = json::array();
    bool sent_role = false;
    std::string finish_reason;
  };

  std::string content_chunk(size_t index, const std::string& content, const json& items);
  std::string reasoning_chunk(size_t index, const std::string& reasoning);
  std::string delta_chunk(size_t index, json delta);
  std::string call_id(size_t index, int32_t tool_index) const;
  std::string tool_call_part(size_t index, const OutputPart& part);
  std::string tool_call_parts(size_t index, const std::vector<OutputPart>& parts);
  std::string finish_choice(size_t index, const StreamEvent& last, const std::string& content);
  ReplyChunk finish_reply();
  json choice_delta(size_t index, const std::string& text, const json& logprobs, const json& finish) const;
  json chunk_envelope() const;
  json logprobs_json(const json& items, size_t text_offset = 0) const;
  json usage() const;

  ResponseShape shape_;
  const Runtime& tokenizer_;
  ReplyTally tally_;
  std::vector<Choice> choices_;
};

// The answer text of an event's parts (reasoning and calls left out), and its reasoning.
std::string answer_text(const std::vector<OutputPart>& parts);
std::string reasoning_text(const std::vector<OutputPart>& parts);

}  // namespace autoglm
