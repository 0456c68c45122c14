#include "server/api/anthropic_messages.h"

#include "core/random_id.h"

namespace autoglm {
namespace {

const char* anthropic_error_type(int status) {
  switch (status) {
    case 400:
    case 405:
    case 408:
    case 422: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    default: return "api_error";
  }
}

json anthropic_error(int status, const std::string& message, const std::string& param) {
  return {{"type", "error"},
          {"error",
           {{"type", anthropic_error_type(status)}, {"message", param.empty() ? message : param + ": " + message}}}};
}

}  // namespace

Reply anthropic_reply(Reply reply) {
  if (reply.status < 400 || reply.stream) return reply;
  const json body = json::parse(reply.body, nullptr, false);
  if (!body.is_object() || !body.contains("error") || !body["error"].is_object()) return reply;
  const json& e = body["error"];
  const std::string message = e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : "";
  const std::string param = e.contains("param") && e["param"].is_string() ? e["param"].get<std::string>() : "";
  reply.body = anthropic_error(reply.status, message, param).dump(-1, ' ', false, json::error_handler_t::replace);
  return reply;
}

AnthropicWriter::AnthropicWriter(const ResponseShape& chat_shape, RequestMetrics& metrics)
    : id_(random_id("msg_")),
      model_(chat_shape.model),
      call_id_prefix_(chat_shape.call_id_prefix),
      stream_(chat_shape.stream),
      tally_(metrics, 1) {}

void AnthropicWriter::event(const std::string& type, json payload) {
  if (!stream_) return;
  json e = {{"type", type}};
  for (auto& [k, v] : payload.items()) e[k] = v;
  out_ += "event: " + type + "\ndata: " + e.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

json AnthropicWriter::usage() const {
  return {{"input_tokens", tally_.prompt_tokens()},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", tally_.cached_tokens()},
          {"output_tokens", tally_.completion_tokens()}};
}

json AnthropicWriter::message(const json& content) const {
  return {{"id", id_},          {"type", "message"},      {"role", "assistant"},      {"model", model_},
          {"content", content}, {"stop_reason", nullptr}, {"stop_sequence", nullptr}, {"usage", usage()}};
}

void AnthropicWriter::open_block(Block kind, json start) {
  open_ = kind;
  content_.push_back(start);
  event("content_block_start", {{"index", content_.size() - 1}, {"content_block", std::move(start)}});
}

void AnthropicWriter::close_block() {
  if (open_ == Block::kNone) return;
  json& block = content_.back();
  if (open_ == Block::kToolUse) {  // the arguments a parser completed are JSON; anything else is kept as text
    json input = json::parse(arguments_.empty() ? "{}" : arguments_, nullptr, false);
    block["input"] = input.is_discarded() ? json{{"arguments", arguments_}} : input;
    arguments_.clear();
  }
  event("content_block_stop", {{"index", content_.size() - 1}});
  open_ = Block::kNone;
}

void AnthropicWriter::thinking_part(const std::string& piece) {
  if (piece.empty()) return;
  if (open_ != Block::kThinking) {
    close_block();
    open_block(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
  }
  content_.back()["thinking"] = content_.back()["thinking"].get<std::string>() + piece;
  event("content_block_delta",
        {{"index", content_.size() - 1}, {"delta", {{"type", "thinking_delta"}, {"thinking", piece}}}});
}

void AnthropicWriter::text_part(const std::string& piece) {
  if (piece.empty()) return;
  if (open_ != Block::kText) {
    close_block();
    open_block(Block::kText, {{"type", "text"}, {"text", ""}});
  }
  content_.back()["text"] = content_.back()["text"].get<std::string>() + piece;
  event("content_block_delta", {{"index", content_.size() - 1}, {"delta", {{"type", "text_delta"}, {"text", piece}}}});
}

void AnthropicWriter::tool_call_part(const OutputPart& part) {
  if (part.kind == PartKind::kToolCallBegin) {
    close_block();
    open_block(Block::kToolUse, {{"type", "tool_use"},
                                 {"id", call_id_prefix_ + std::to_string(part.tool_index)},
                                 {"name", part.text},
                                 {"input", json::object()}});
  } else if (part.kind == PartKind::kToolCallArguments) {
    arguments_ += part.text;
    event("content_block_delta",
          {{"index", content_.size() - 1}, {"delta", {{"type", "input_json_delta"}, {"partial_json", part.text}}}});
  } else {
    close_block();
  }
}

void AnthropicWriter::render(const StreamEvent& ev) {
  for (const OutputPart& part : ev.parts) {
    switch (part.kind) {
      case PartKind::kReasoning: thinking_part(part.text); break;
      case PartKind::kText: text_part(part.text); break;
      default: tool_call_part(part);
    }
  }
}

std::string AnthropicWriter::stop_reason(const StreamEvent& last) const {
  switch (last.finish_reason) {
    case FinishReason::kToolCalls: return "tool_use";
    case FinishReason::kLength: return "max_tokens";
    case FinishReason::kStop: return last.stop_sequence.empty() ? "end_turn" : "stop_sequence";
    default: return "end_turn";
  }
}

ReplyChunk AnthropicWriter::consume(const StreamEvent& ev, size_t index) {
  out_.clear();
  tally_.observe(ev, index);
  if (!started_) {
    started_ = true;
    json head = message(json::array());
    head["usage"]["input_tokens"] = ev.prompt_tokens;
    head["usage"]["cache_read_input_tokens"] = ev.cached_tokens;
    event("message_start", {{"message", head}});
    event("ping", json::object());
  }
  render(ev);
  ReplyChunk chunk;
  chunk.complete = tally_.whole();
  chunk.prompt_tokens = tally_.prompt_tokens();
  chunk.completion_tokens = tally_.completion_tokens();
  if (!chunk.complete) {
    chunk.bytes = std::move(out_);
    return chunk;
  }
  close_block();
  const bool failed = tally_.status() >= 400 || ev.finish_reason == FinishReason::kError ||
                      ev.finish_reason == FinishReason::kCancelled || ev.finish_reason == FinishReason::kTimeout;
  const std::string error =
      ev.error.empty() ? std::string("generation ended: ") + finish_reason_name(ev.finish_reason) : ev.error;
  const int status = tally_.status() >= 400 ? tally_.status() : 500;
  if (failed) {
    event("error", anthropic_error(status, error, ""));
    chunk.status = stream_ ? 200 : status;
    if (!stream_) out_ = anthropic_error(status, error, "").dump(-1, ' ', false, json::error_handler_t::replace);
  } else {
    json whole = message(content_);
    whole["stop_reason"] = stop_reason(ev);
    whole["stop_sequence"] = ev.stop_sequence.empty() ? json(nullptr) : json(ev.stop_sequence);
    event("message_delta",
          {{"delta", {{"stop_reason", whole["stop_reason"]}, {"stop_sequence", whole["stop_sequence"]}}},
           {"usage", usage()}});
    event("message_stop", json::object());
    if (!stream_) out_ = whole.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  chunk.bytes = std::move(out_);
  return chunk;
}

}  // namespace autoglm
