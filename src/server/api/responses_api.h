// The Responses API (POST /v1/responses, GET and DELETE /v1/responses/{id}) over the chat
// pipeline: a request becomes chat messages (instructions as the system message, input
// items as turns, function calls and their outputs as tool calls and tool messages,
// previous_response_id's stored conversation first; reasoning items given back as the next
// assistant turn's reasoning_content), and the generation's typed events are rendered as Response
// items (reasoning, message, function_call) and the standard stream events (response.created,
// .output_item.added, .reasoning_text.delta, .output_text.delta, .function_call_arguments.delta, ...,
// response.completed).
#pragma once

#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "server/api/request_params.h"
#include "server/api/response_writer.h"

namespace autoglm {

// Stored responses: the response object and the conversation it ends (chat messages), per
// API key; the oldest go once more than `capacity` are held.
class ResponseStore {
 public:
  explicit ResponseStore(size_t capacity = 1024) : capacity_(capacity) {}
  struct Entry {
    json response;
    json messages;  // the whole conversation, the response's output included
    std::string owner;
  };
  void put(const std::string& id, Entry entry);
  std::optional<Entry> get(const std::string& id, const std::string& owner) const;
  bool erase(const std::string& id, const std::string& owner);

 private:
  mutable std::mutex mutex_;
  size_t capacity_;
  std::map<std::string, Entry> entries_;
  std::deque<std::string> order_;
};

// The chat completions body for a Responses body; `conversation` gets the messages sent
// (the previous conversation, then this input). Throws ParamError naming Responses fields.
json responses_to_chat(const json& body, const json& previous_messages, json& conversation);

// Renames a chat field in an error to the Responses field it came from.
std::string responses_param(const std::string& chat_param);

class ResponsesWriter {
 public:
  // `request`: the Responses body (its settings are echoed in the response object).
  ResponsesWriter(const json& request, std::string id, std::string model, const ResponseShape& chat_shape,
                  RequestMetrics& metrics);

  ReplyChunk consume(const StreamEvent& event, size_t index);
  // The finished response object and the conversation's messages from its output.
  const json& response() const { return response_; }
  json output_messages() const;

 private:
  void render(const StreamEvent& event);
  void text_part(const std::string& piece);
  void reasoning_part(const std::string& piece);
  void close_reasoning();
  void tool_call_part(const OutputPart& part);
  void open_message();
  void close_message();
  void event(const std::string& type, json payload);
  json base_response(const std::string& status) const;

  json request_;
  std::string id_, model_;
  std::string call_id_prefix_;
  int64_t created_;
  bool stream_;
  ReplyTally tally_;
  json response_;
  json output_ = json::array();      // items so far
  std::optional<size_t> message_;    // the open message item
  std::optional<size_t> reasoning_;  // the open reasoning item
  std::string text_, reasoning_text_;
  int64_t reasoning_tokens_ = 0;  // tokens of events that held only reasoning
  std::string finish_;
  json usage_;
  std::string out_;  // stream bytes of this consume call
  int64_t sequence_ = 0;
  bool started_ = false;
};

}  // namespace autoglm
