#include "server/api/response_writer.h"

namespace autoglm {
namespace {

std::string token_text(const Runtime& tok, int32_t id) {
  return tok.token_piece(id);
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

json logprob_entry(const Runtime& tok, const TokenLogprob& lp) {
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

}  // namespace

ResponseWriter::ResponseWriter(ResponseShape shape, const Runtime& tokenizer, RequestMetrics& metrics)
    : shape_(std::move(shape)),
      tokenizer_(tokenizer),
      tally_(metrics, shape_.choices),
      choices_(std::max<size_t>(1, shape_.choices)) {}

// A call's id: the request's prefix, the choice (past the first) and the call's index.
std::string ResponseWriter::call_id(size_t index, int32_t tool_index) const {
  std::string id = shape_.call_id_prefix;
  if (index > 0) id += "c" + std::to_string(index) + "_";
  return id + std::to_string(tool_index);
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
  const int64_t prompt = tally_.prompt_tokens(), completion = tally_.completion_tokens();
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", tally_.cached_tokens()}}}};
}

// A tool-call part: the call is recorded; when streaming, its chunk: the first opens the call
// (id, name), the next carry its arguments.
std::string ResponseWriter::tool_call_part(size_t index, const OutputPart& part) {
  Choice& c = choices_[index];
  if (part.kind == PartKind::kToolCallBegin)
    c.tool_calls.push_back({{"id", call_id(index, part.tool_index)},
                            {"type", "function"},
                            {"function", {{"name", part.text}, {"arguments", ""}}}});
  json& call = c.tool_calls.back();
  if (part.kind == PartKind::kToolCallArguments)
    call["function"]["arguments"] = call["function"]["arguments"].get<std::string>() + part.text;
  if (!shape_.stream || part.kind == PartKind::kToolCallEnd) return "";
  json delta = {{"tool_calls", json::array({{{"index", part.tool_index}}})}};
  json& entry = delta["tool_calls"][0];
  if (part.kind == PartKind::kToolCallBegin) {
    entry["id"] = call["id"];
    entry["type"] = "function";
    entry["function"] = {{"name", part.text}, {"arguments", ""}};
  } else {
    entry["function"] = {{"arguments", part.text}};
  }
  return delta_chunk(index, std::move(delta));
}

// A stream chunk of one choice's delta (the role with its first), no logprobs, not finished.
std::string ResponseWriter::delta_chunk(size_t index, json delta) {
  Choice& c = choices_[index];
  if (!c.sent_role) delta["role"] = "assistant";
  c.sent_role = true;
  json chunk = chunk_envelope();
  chunk["choices"] =
      json::array({{{"index", index}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
  return sse(chunk);
}

std::string ResponseWriter::tool_call_parts(size_t index, const std::vector<OutputPart>& parts) {
  std::string out;
  for (const OutputPart& part : parts)
    if (part.kind != PartKind::kText && part.kind != PartKind::kReasoning) out += tool_call_part(index, part);
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

namespace {

std::string text_of(const std::vector<OutputPart>& parts, PartKind kind) {
  std::string text;
  for (const OutputPart& part : parts)
    if (part.kind == kind) text += part.text;
  return text;
}

}  // namespace

std::string answer_text(const std::vector<OutputPart>& parts) {
  return text_of(parts, PartKind::kText);
}

std::string reasoning_text(const std::vector<OutputPart>& parts) {
  return text_of(parts, PartKind::kReasoning);
}

// Reasoning streams as delta.reasoning_content (llama-server's, vLLM's and Ollama's name).
std::string ResponseWriter::reasoning_chunk(size_t index, const std::string& reasoning) {
  Choice& c = choices_[index];
  c.reasoning += reasoning;
  if (!shape_.stream || reasoning.empty()) return "";
  return delta_chunk(index, json{{"reasoning_content", reasoning}});
}

ReplyChunk ResponseWriter::consume(const StreamEvent& ev, size_t index) {
  tally_.observe(ev, index);
  json items = json::array();
  for (const auto& lp : ev.logprobs) items.push_back(logprob_entry(tokenizer_, lp));
  const std::string content = answer_text(ev.parts);
  ReplyChunk chunk;
  chunk.bytes = reasoning_chunk(index, reasoning_text(ev.parts));
  if (ev.finished) {
    chunk.bytes += finish_choice(index, ev, content);
    if (tally_.whole()) {
      ReplyChunk last = finish_reply();
      last.bytes = chunk.bytes + last.bytes;
      return last;
    }
    return chunk;
  }
  chunk.bytes += content_chunk(index, content, items);
  chunk.bytes += tool_call_parts(index, ev.parts);
  return chunk;
}

// A choice's last event: its calls, then its final chunk when streaming.
std::string ResponseWriter::finish_choice(size_t index, const StreamEvent& ev, const std::string& content) {
  Choice& c = choices_[index];
  c.text += content;
  std::string out = tool_call_parts(index, ev.parts);
  c.finish_reason = finish_reason_name(ev.finish_reason);
  if (!shape_.stream) return out;
  json last = chunk_envelope();
  last["choices"] = json::array({choice_delta(index, content, logprobs_json(json::array()), c.finish_reason)});
  return out + sse(last);
}

// Every choice has finished: usage and [DONE] for a stream, else the whole body.
ReplyChunk ResponseWriter::finish_reply() {
  ReplyChunk chunk;
  chunk.complete = true;
  chunk.status = tally_.status();
  chunk.prompt_tokens = tally_.prompt_tokens();
  chunk.completion_tokens = tally_.completion_tokens();
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
      if (!c.reasoning.empty()) choice["message"]["reasoning_content"] = c.reasoning;
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
  if (!tally_.error().empty()) full["error"] = tally_.error();
  chunk.bytes = dump(full);
  return chunk;
}

}  // namespace autoglm
