#include "server/response_writer.h"

namespace autoglm {
namespace {

using Clock = std::chrono::steady_clock;

std::string token_text(const Tokenizer& tok, int32_t id) {
  return tok.token_to_piece(id, true);
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

json logprob_entry(const Tokenizer& tok, const TokenLogprob& lp) {
  json top = json::array();
  for (const auto& [id, logprob] : lp.top)
    top.push_back({{"token", token_text(tok, id)}, {"logprob", logprob}, {"bytes", bytes_of(token_text(tok, id))}});
  const std::string text = token_text(tok, lp.token);
  return {{"token", text}, {"logprob", lp.logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", top}};
}

json usage_of(const StreamEvent& last) {
  return {{"prompt_tokens", last.prompt_tokens},
          {"completion_tokens", last.completion_tokens},
          {"total_tokens", last.prompt_tokens + last.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", last.cached_tokens}}}};
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse(const json& j) {
  return "data: " + dump(j) + "\n\n";
}

json tool_call_json(const ToolCall& c) {
  return {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

}  // namespace

int http_status_of(FinishReason reason) {
  switch (reason) {
    case FinishReason::kError: return 500;
    case FinishReason::kTimeout: return 408;
    default: return 200;
  }
}

ResponseWriter::ResponseWriter(ResponseShape shape, const Tokenizer& tokenizer, ServerMetrics& metrics)
    : shape_(std::move(shape)), tokenizer_(tokenizer), metrics_(metrics) {
  if (shape_.tool_names)
    tools_ = std::make_unique<ToolCallParser>(shape_.family, *shape_.tool_names, shape_.call_id_prefix);
}

void ResponseWriter::observe_latency(const StreamEvent& ev) {
  if (ev.tokens.empty()) return;
  const auto now = Clock::now();
  if (!last_token_)
    metrics_.time_to_first_token.observe(std::chrono::duration<double>(now - arrival_).count());
  else
    metrics_.inter_token_latency.observe(std::chrono::duration<double>(now - *last_token_).count());
  last_token_ = now;
}

json ResponseWriter::chunk_envelope() const {
  return {{"id", shape_.id},
          {"object", shape_.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", shape_.created},
          {"model", shape_.model}};
}

json ResponseWriter::choice_delta(const std::string& text, const json& logprobs, const json& finish) const {
  json c = {{"index", 0}};
  if (shape_.chat) {
    json delta = json::object();
    if (!sent_role_) delta["role"] = "assistant";
    if (!text.empty() || finish.is_null()) delta["content"] = text;
    c["delta"] = delta;
  } else {
    c["text"] = text;
  }
  c["logprobs"] = logprobs;
  c["finish_reason"] = finish;
  return c;
}

// Chat: {"content": [entries]}. Completions use the legacy shape: parallel lists of
// tokens, their logprobs, {token: logprob} alternatives and text offsets.
json ResponseWriter::logprobs_json(const json& items, size_t text_offset) const {
  if (!shape_.logprobs) return nullptr;
  if (shape_.chat) return {{"content", items}};
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const auto& it : items) {
    out["tokens"].push_back(it["token"]);
    out["token_logprobs"].push_back(it["logprob"]);
    json top = json::object();
    for (const auto& alt : it["top_logprobs"]) top[alt["token"].get<std::string>()] = alt["logprob"];
    out["top_logprobs"].push_back(top);
    out["text_offset"].push_back(text_offset);
    text_offset += it["token"].get<std::string>().size();
  }
  return out;
}

// Records the calls the parser completed (only the first without parallel_tool_calls); when
// streaming, returns their chunks: one opens each call (id, name), the next carries its arguments.
std::string ResponseWriter::take_tool_calls(const std::vector<ToolCall>& calls) {
  std::string out;
  for (const ToolCall& c : calls) {
    const int index = int(tool_calls_.size());
    if (!shape_.parallel_tool_calls && index > 0) break;
    tool_calls_.push_back(tool_call_json(c));
    if (!shape_.stream) continue;
    json open = chunk_envelope(), args = chunk_envelope();
    json delta = {{"tool_calls", json::array({{{"index", index},
                                               {"id", c.id},
                                               {"type", "function"},
                                               {"function", {{"name", c.name}, {"arguments", ""}}}}})}};
    if (!sent_role_) delta["role"] = "assistant";
    sent_role_ = true;
    open["choices"] =
        json::array({{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
    args["choices"] = json::array(
        {{{"index", 0},
          {"delta", {{"tool_calls", json::array({{{"index", index}, {"function", {{"arguments", c.arguments}}}}})}}},
          {"logprobs", nullptr},
          {"finish_reason", nullptr}}});
    out += sse(open) + sse(args);
  }
  return out;
}

std::string ResponseWriter::content_chunk(const std::string& content, const json& items) {
  text_ += content;
  for (const auto& it : items) logprob_items_.push_back(it);
  if (!shape_.stream || (content.empty() && items.empty())) return "";
  json chunk = chunk_envelope();
  chunk["choices"] = json::array({choice_delta(content, logprobs_json(items, text_.size() - content.size()), nullptr)});
  sent_role_ = true;
  return sse(chunk);
}

ReplyChunk ResponseWriter::consume(const StreamEvent& ev) {
  observe_latency(ev);
  json items = json::array();
  for (const auto& lp : ev.logprobs) items.push_back(logprob_entry(tokenizer_, lp));
  // With tools, the text goes through the family's parser: content, and calls once complete.
  std::string content = ev.text;
  std::vector<ToolCall> calls;
  if (tools_) {
    auto parsed = tools_->push(ev.text);
    if (ev.finished) {
      auto rest = tools_->finish(ev.finish_reason == FinishReason::kLength);
      parsed.content += rest.content;
      parsed.calls.insert(parsed.calls.end(), rest.calls.begin(), rest.calls.end());
    }
    content = parsed.content;
    calls = parsed.calls;
  }
  if (ev.finished) return finish(ev, content, calls);
  ReplyChunk chunk;
  chunk.bytes = content_chunk(content, items);
  chunk.bytes += take_tool_calls(calls);
  return chunk;
}

// The last event: metrics, then the final chunk(s) or the whole body.
ReplyChunk ResponseWriter::finish(const StreamEvent& ev, const std::string& content,
                                  const std::vector<ToolCall>& calls) {
  ReplyChunk chunk;
  chunk.complete = true;
  chunk.status = http_status_of(ev.finish_reason);
  chunk.prompt_tokens = ev.prompt_tokens;
  chunk.completion_tokens = ev.completion_tokens;
  text_ += content;
  metrics_.e2e_latency.observe(std::chrono::duration<double>(Clock::now() - arrival_).count());
  metrics_.queue_time.observe(ev.queue_seconds);
  if (ev.completion_tokens > 0) metrics_.prefill_time.observe(ev.prefill_seconds);
  chunk.bytes = take_tool_calls(calls);
  const bool called = !tool_calls_.empty() && ev.finish_reason == FinishReason::kStop;
  const std::string finish = finish_reason_name(called ? FinishReason::kToolCalls : ev.finish_reason);
  if (shape_.stream) {
    json last = chunk_envelope();
    last["choices"] = json::array({choice_delta(content, logprobs_json(json::array()), finish)});
    chunk.bytes += sse(last);
    if (shape_.include_usage) {
      json usage = chunk_envelope();
      usage["choices"] = json::array();
      usage["usage"] = usage_of(ev);
      chunk.bytes += sse(usage);
    }
    chunk.bytes += "data: [DONE]\n\n";
    return chunk;
  }
  json choice = {{"index", 0}};
  if (shape_.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text_}};
    if (!tool_calls_.empty()) {
      if (text_.empty()) choice["message"]["content"] = nullptr;
      choice["message"]["tool_calls"] = tool_calls_;
    }
  } else {
    choice["text"] = text_;
  }
  choice["logprobs"] = logprobs_json(logprob_items_);
  choice["finish_reason"] = finish;
  json full = {{"id", shape_.id},
               {"object", shape_.chat ? "chat.completion" : "text_completion"},
               {"created", shape_.created},
               {"model", shape_.model},
               {"choices", json::array({choice})},
               {"usage", usage_of(ev)}};
  if (!ev.error.empty()) full["error"] = ev.error;
  chunk.bytes = dump(full);  // take_tool_calls wrote nothing: not streaming
  return chunk;
}

}  // namespace autoglm
