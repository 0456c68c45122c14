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

ResponseWriter::ResponseWriter(ResponseShape shape, const Tokenizer& tokenizer, RequestMetrics& metrics)
    : shape_(std::move(shape)),
      tokenizer_(tokenizer),
      metrics_(metrics),
      choices_(std::max<size_t>(1, shape_.choices)) {
  if (shape_.tool_names)
    for (size_t i = 0; i < choices_.size(); ++i)
      choices_[i].tools = std::make_unique<ToolCallParser>(
          shape_.family, *shape_.tool_names,
          i == 0 ? shape_.call_id_prefix : shape_.call_id_prefix + "c" + std::to_string(i) + "_");
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

json ResponseWriter::choice_delta(size_t index, const std::string& text, const json& logprobs,
                                  const json& finish) const {
  json c = {{"index", index}};
  if (shape_.chat) {
    json delta = json::object();
    if (!choices_[index].sent_role) delta["role"] = "assistant";
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

json ResponseWriter::usage() const {
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion_tokens_},
          {"total_tokens", prompt_tokens_ + completion_tokens_},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens_}}}};
}

// Records the calls the parser completed (only the first without parallel_tool_calls); when
// streaming, returns their chunks: one opens each call (id, name), the next carries its arguments.
std::string ResponseWriter::take_tool_calls(size_t index, const std::vector<ToolCall>& calls) {
  Choice& c = choices_[index];
  std::string out;
  for (const ToolCall& call : calls) {
    const int at = int(c.tool_calls.size());
    if (!shape_.parallel_tool_calls && at > 0) break;
    c.tool_calls.push_back(tool_call_json(call));
    if (!shape_.stream) continue;
    json open = chunk_envelope(), args = chunk_envelope();
    json delta = {{"tool_calls", json::array({{{"index", at},
                                               {"id", call.id},
                                               {"type", "function"},
                                               {"function", {{"name", call.name}, {"arguments", ""}}}}})}};
    if (!c.sent_role) delta["role"] = "assistant";
    c.sent_role = true;
    open["choices"] =
        json::array({{{"index", index}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
    args["choices"] = json::array(
        {{{"index", index},
          {"delta", {{"tool_calls", json::array({{{"index", at}, {"function", {{"arguments", call.arguments}}}}})}}},
          {"logprobs", nullptr},
          {"finish_reason", nullptr}}});
    out += sse(open) + sse(args);
  }
  return out;
}

std::string ResponseWriter::content_chunk(size_t index, const std::string& content, const json& items) {
  Choice& c = choices_[index];
  c.text += content;
  for (const auto& it : items) c.logprob_items.push_back(it);
  if (!shape_.stream || (content.empty() && items.empty())) return "";
  json chunk = chunk_envelope();
  chunk["choices"] =
      json::array({choice_delta(index, content, logprobs_json(items, c.text.size() - content.size()), nullptr)});
  c.sent_role = true;
  return sse(chunk);
}

ReplyChunk ResponseWriter::consume(const StreamEvent& ev, size_t index) {
  observe_latency(ev);
  json items = json::array();
  for (const auto& lp : ev.logprobs) items.push_back(logprob_entry(tokenizer_, lp));
  // With tools, the text goes through the family's parser: content, and calls once complete.
  std::string content = ev.text;
  std::vector<ToolCall> calls;
  if (auto& tools = choices_[index].tools) {
    auto parsed = tools->push(ev.text);
    if (ev.finished) {
      auto rest = tools->finish(ev.finish_reason == FinishReason::kLength);
      parsed.content += rest.content;
      parsed.calls.insert(parsed.calls.end(), rest.calls.begin(), rest.calls.end());
    }
    content = parsed.content;
    calls = parsed.calls;
  }
  ReplyChunk chunk;
  if (ev.finished) {
    chunk.bytes = finish_choice(index, ev, content, calls);
    if (finished_ == choices_.size()) {
      ReplyChunk last = finish_reply();
      last.bytes = chunk.bytes + last.bytes;
      return last;
    }
    return chunk;
  }
  chunk.bytes = content_chunk(index, content, items);
  chunk.bytes += take_tool_calls(index, calls);
  return chunk;
}

// A choice's last event: its final chunk when streaming; its share of usage and status.
std::string ResponseWriter::finish_choice(size_t index, const StreamEvent& ev, const std::string& content,
                                          const std::vector<ToolCall>& calls) {
  Choice& c = choices_[index];
  c.text += content;
  c.finished = true;
  ++finished_;
  if (index == 0 || prompt_tokens_ == 0) prompt_tokens_ = ev.prompt_tokens;
  if (index == 0) cached_tokens_ = ev.cached_tokens;
  completion_tokens_ += ev.completion_tokens;
  if (status_ == 200) status_ = http_status_of(ev.finish_reason);
  if (error_.empty()) error_ = ev.error;
  metrics_.e2e_latency.observe(std::chrono::duration<double>(Clock::now() - arrival_).count());
  metrics_.queue_time.observe(ev.queue_seconds);
  if (ev.completion_tokens > 0) metrics_.prefill_time.observe(ev.prefill_seconds);
  std::string out = take_tool_calls(index, calls);
  const bool called = !c.tool_calls.empty() && ev.finish_reason == FinishReason::kStop;
  c.finish_reason = finish_reason_name(called ? FinishReason::kToolCalls : ev.finish_reason);
  if (!shape_.stream) return out;
  json last = chunk_envelope();
  last["choices"] = json::array({choice_delta(index, content, logprobs_json(json::array()), c.finish_reason)});
  return out + sse(last);
}

// Every choice has finished: usage and [DONE] for a stream, else the whole body.
ReplyChunk ResponseWriter::finish_reply() {
  ++metrics_.requests;
  if (status_ != 200) ++metrics_.errors;
  metrics_.prompt_tokens += uint64_t(prompt_tokens_);
  metrics_.completion_tokens += uint64_t(completion_tokens_);
  ReplyChunk chunk;
  chunk.complete = true;
  chunk.status = status_;
  chunk.prompt_tokens = prompt_tokens_;
  chunk.completion_tokens = completion_tokens_;
  if (shape_.stream) {
    if (shape_.include_usage) {
      json usage_chunk = chunk_envelope();
      usage_chunk["choices"] = json::array();
      usage_chunk["usage"] = usage();
      chunk.bytes += sse(usage_chunk);
    }
    chunk.bytes += "data: [DONE]\n\n";
    return chunk;
  }
  json list = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    json choice = {{"index", i}};
    if (shape_.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      if (!c.tool_calls.empty()) {
        if (c.text.empty()) choice["message"]["content"] = nullptr;
        choice["message"]["tool_calls"] = c.tool_calls;
      }
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = logprobs_json(c.logprob_items);
    choice["finish_reason"] = c.finish_reason;
    list.push_back(choice);
  }
  json full = {{"id", shape_.id},           {"object", shape_.chat ? "chat.completion" : "text_completion"},
               {"created", shape_.created}, {"model", shape_.model},
               {"choices", list},           {"usage", usage()}};
  if (!error_.empty()) full["error"] = error_;
  chunk.bytes = dump(full);
  return chunk;
}

}  // namespace autoglm
