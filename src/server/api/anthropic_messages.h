// The Anthropic Messages API's replies: a generation's typed events rendered as content blocks
// (thinking, text, tool_use) and Anthropic's stream events (message_start,
// content_block_start/_delta/_stop, message_delta, message_stop, ping), and errors in
// Anthropic's shape: {"type": "error", "error": {"type", "message"}}, the field named first.
// The request side is anthropic_request.h.
#pragma once

#include <optional>
#include <string>

#include "server/api/reply.h"
#include "server/api/request_params.h"
#include "server/api/response_writer.h"

namespace autoglm {

// A reply in Anthropic's shape: an error body ({"error": {"message", "type", "param"}}) is
// rewritten as {"type": "error", "error": {"type", "message"}}; anything else is unchanged.
Reply anthropic_reply(Reply reply);

class AnthropicWriter {
 public:
  // `chat_shape`: the reply's stream flag, model and tool call ids.
  AnthropicWriter(const ResponseShape& chat_shape, RequestMetrics& metrics);

  ReplyChunk consume(const StreamEvent& event, size_t index);

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };
  void render(const StreamEvent& event);
  void thinking_part(const std::string& piece);
  void text_part(const std::string& piece);
  void tool_call_part(const OutputPart& part);
  void open_block(Block kind, json start);
  void close_block();
  void event(const std::string& type, json payload);
  json usage() const;
  json message(const json& content) const;
  std::string stop_reason(const StreamEvent& last) const;

  std::string id_, model_, call_id_prefix_;
  bool stream_;
  ReplyTally tally_;
  json content_ = json::array();  // the blocks so far (a streamed reply keeps them too)
  Block open_ = Block::kNone;
  std::string arguments_;  // the open tool_use block's input as JSON text
  std::string out_;        // stream bytes of this consume call
  bool started_ = false;
};

}  // namespace autoglm
