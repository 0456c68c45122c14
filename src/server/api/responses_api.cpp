#include "server/api/responses_api.h"

#include "server/api/openai_request.h"

#include <algorithm>
#include <ctime>
#include <utility>

#include "core/random_id.h"

namespace autoglm {

void ResponseStore::put(const std::string& id, Entry entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (entries_.emplace(id, std::move(entry)).second) order_.push_back(id);
  while (order_.size() > capacity_) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
}

std::optional<ResponseStore::Entry> ResponseStore::get(const std::string& id, const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.owner != owner) return std::nullopt;  // others' look absent
  return it->second;
}

bool ResponseStore::erase(const std::string& id, const std::string& owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.owner != owner) return false;
  entries_.erase(it);
  std::erase(order_, id);
  return true;
}

namespace {

// A message's content: a string, or parts of type input_text/output_text/text as one text; with
// input_image parts, the parts as the chat API's (text and image_url).
json message_parts(const json& content, const std::string& where) {
  if (content.is_string()) return content;
  if (!content.is_array()) bad(where, "'" + where + "' must be a string or a list of text and image parts");
  json chat_parts = json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const std::string type = string_field(content[i], "type");
    if (type == "input_image") {
      chat_parts.push_back(content[i]);
      continue;
    }
    if (type != "input_text" && type != "output_text" && type != "text")
      bad(at + ".type", "content part type '" + type + "' is not supported (input_text, output_text, input_image)");
    if (!content[i].contains("text") || !content[i]["text"].is_string()) bad(at + ".text", "must be a string");
    chat_parts.push_back({{"type", "text"}, {"text", content[i]["text"]}});
  }
  return message_content(chat_parts, where);
}

void add_input_item(const json& item, const std::string& where, json& messages) {
  if (!item.is_object()) bad(where, "each input item must be an object");
  const std::string type = item.contains("role") && !item.contains("type") ? "message" : string_field(item, "type");
  if (type == "message") {
    const std::string role = string_field(item, "role");
    if (role != "user" && role != "system" && role != "developer" && role != "assistant")
      bad(where + ".role", "role must be user, system, developer or assistant");
    if (!item.contains("content")) bad(where + ".content", "a message needs content");
    messages.push_back({{"role", role}, {"content", message_parts(item["content"], where + ".content")}});
  } else if (type == "function_call") {
    for (const char* k : {"call_id", "name", "arguments"})
      if (!item.contains(k) || !item[k].is_string()) bad(where + "." + k, std::string("'") + k + "' must be a string");
    json call = {{"id", item["call_id"]},
                 {"type", "function"},
                 {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
    if (!messages.empty() && messages.back()["role"] == "assistant" && messages.back().contains("tool_calls"))
      messages.back()["tool_calls"].push_back(call);
    else if (!messages.empty() && messages.back().value("pending_reasoning", false))
      messages.back() = {{"role", "assistant"},
                         {"content", nullptr},
                         {"reasoning_content", messages.back()["reasoning_content"]},
                         {"tool_calls", json::array({call})}};
    else
      messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
  } else if (type == "reasoning") {
    // A reasoning item given back: the thinking of the assistant turn that follows it.
    std::string text;
    if (item.contains("content") && item["content"].is_array())
      for (const json& part : item["content"])
        if (part.is_object() && part.contains("text") && part["text"].is_string())
          text += part["text"].get<std::string>();
    messages.push_back(
        {{"role", "assistant"}, {"content", ""}, {"reasoning_content", text}, {"pending_reasoning", true}});
  } else if (type == "function_call_output") {
    if (!item.contains("call_id") || !item["call_id"].is_string())
      bad(where + ".call_id", "'call_id' must be a string");
    const json& output = item.value("output", json(""));
    messages.push_back({{"role", "tool"},
                        {"tool_call_id", item["call_id"]},
                        {"content", output.is_string() ? output.get<std::string>() : output.dump()}});
  } else {
    bad(where + ".type",
        "input item type '" + type + "' is not supported (message, reasoning, function_call, function_call_output)");
  }
}

// A reasoning item's placeholder turn merged into the assistant turn after it (a message or the
// first of its calls); one with nothing after it is dropped.
json merge_reasoning(const json& messages) {
  json out = json::array();
  std::string pending;
  for (const json& m : messages) {
    if (m.value("pending_reasoning", false)) {
      pending += m["reasoning_content"].get<std::string>();
      continue;
    }
    json copy = m;
    if (!pending.empty() && copy["role"] == "assistant") copy["reasoning_content"] = std::exchange(pending, "");
    if (!pending.empty() && copy["role"] != "assistant") pending.clear();
    out.push_back(std::move(copy));
  }
  return out;
}

json chat_tools(const json& tools) {
  if (!tools.is_array()) bad("tools", "'tools' must be a list");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (string_field(tools[i], "type") != "function") bad(where + ".type", "only function tools are supported");
    json fn = {{"name", tools[i].value("name", json())}};
    for (const char* k : {"description", "parameters", "strict"})
      if (tools[i].contains(k)) fn[k] = tools[i][k];
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

}  // namespace

json responses_to_chat(const json& body, const json& previous_messages, json& conversation) {
  conversation = previous_messages.is_array() ? previous_messages : json::array();
  if (!body.contains("input")) bad("input", "'input' is required");
  const json& input = body["input"];
  if (input.is_string()) {
    conversation.push_back({{"role", "user"}, {"content", input}});
  } else if (input.is_array()) {
    for (size_t i = 0; i < input.size(); ++i)
      add_input_item(input[i], "input[" + std::to_string(i) + "]", conversation);
  } else {
    bad("input", "'input' must be a string or a list of items");
  }
  conversation = merge_reasoning(conversation);
  json messages = json::array();
  if (body.contains("instructions") && !body["instructions"].is_null()) {
    if (!body["instructions"].is_string()) bad("instructions", "'instructions' must be a string");
    messages.push_back({{"role", "system"}, {"content", body["instructions"]}});
  }
  for (const json& m : conversation) messages.push_back(m);
  json chat = {{"messages", messages}, {"stream", body.value("stream", false)}};
  if (chat["stream"].is_boolean() && chat["stream"].get<bool>()) chat["stream_options"] = {{"include_usage", true}};
  for (const char* k : {"model", "temperature", "top_p", "seed", "parallel_tool_calls", "tool_choice"})
    if (body.contains(k)) chat[k] = body[k];
  copy_chat_extensions(body, chat);
  if (body.contains("reasoning") && !body["reasoning"].is_null()) {
    if (!body["reasoning"].is_object()) bad("reasoning", "'reasoning' must be an object");
    if (body["reasoning"].contains("effort") && !body["reasoning"]["effort"].is_null())
      chat["reasoning_effort"] = body["reasoning"]["effort"];
  }
  if (body.contains("max_output_tokens")) chat["max_tokens"] = body["max_output_tokens"];
  if (body.contains("tools")) chat["tools"] = chat_tools(body["tools"]);
  if (chat.contains("tool_choice") && chat["tool_choice"].is_object())
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", chat["tool_choice"].value("name", json())}}}};
  if (body.contains("text") && body["text"].is_object() && body["text"].contains("format")) {
    const json& f = body["text"]["format"];
    const std::string type = string_field(f, "type");
    if (type == "json_schema")
      chat["response_format"] = {{"type", "json_schema"},
                                 {"json_schema",
                                  {{"name", f.value("name", json("response"))},
                                   {"schema", f.value("schema", json())},
                                   {"strict", f.value("strict", json(false))}}}};
    else if (type == "json_object")
      chat["response_format"] = {{"type", "json_object"}};
    else if (type != "text")
      bad("text.format.type", "'text.format.type' must be text, json_schema or json_object");
  }
  return chat;
}

std::string responses_param(const std::string& p) {
  auto starts = [&](const char* prefix) { return p.rfind(prefix, 0) == 0; };
  if (starts("messages")) return "input";
  if (p == "max_tokens") return "max_output_tokens";
  if (p == "reasoning_effort") return "reasoning.effort";
  if (starts("response_format.json_schema.schema")) return "text.format.schema" + p.substr(34);
  if (starts("response_format")) return "text.format";
  if (starts("tools[")) {
    const size_t fn = p.find(".function");
    if (fn != std::string::npos) return p.substr(0, fn) + p.substr(fn + 9);
  }
  return p;
}

ResponsesWriter::ResponsesWriter(const json& request, std::string id, std::string model,
                                 const ResponseShape& chat_shape, RequestMetrics& metrics)
    : request_(request),
      id_(std::move(id)),
      model_(std::move(model)),
      call_id_prefix_(chat_shape.call_id_prefix),
      created_(int64_t(std::time(nullptr))),
      stream_(chat_shape.stream),
      tally_(metrics, 1) {}

json ResponsesWriter::base_response(const std::string& status) const {
  auto echo = [&](const char* k, json dflt) { return request_.contains(k) ? request_[k] : dflt; };
  json r = {{"id", id_},
            {"object", "response"},
            {"created_at", created_},
            {"status", status},
            {"model", model_},
            {"output", output_},
            {"error", nullptr},
            {"incomplete_details", nullptr},
            {"instructions", echo("instructions", nullptr)},
            {"max_output_tokens", echo("max_output_tokens", nullptr)},
            {"temperature", echo("temperature", 1.0)},
            {"top_p", echo("top_p", 1.0)},
            {"tools", echo("tools", json::array())},
            {"tool_choice", echo("tool_choice", "auto")},
            {"text", echo("text", json{{"format", {{"type", "text"}}}})},
            {"parallel_tool_calls", echo("parallel_tool_calls", true)},
            {"previous_response_id", echo("previous_response_id", nullptr)},
            {"store", echo("store", true)},
            {"metadata", echo("metadata", json::object())},
            {"usage", usage_.is_null() ? json(nullptr) : usage_}};
  return r;
}

void ResponsesWriter::event(const std::string& type, json payload) {
  if (!stream_) return;
  json e = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [k, v] : payload.items()) e[k] = v;
  out_ += "event: " + type + "\ndata: " + e.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

void ResponsesWriter::open_message() {
  if (message_) return;
  message_ = output_.size();
  output_.push_back({{"type", "message"},
                     {"id", random_id("msg_")},
                     {"status", "in_progress"},
                     {"role", "assistant"},
                     {"content", json::array()}});
  const json& item = output_[*message_];
  event("response.output_item.added", {{"output_index", *message_}, {"item", item}});
  event("response.content_part.added",
        {{"item_id", item["id"]},
         {"output_index", *message_},
         {"content_index", 0},
         {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
}

void ResponsesWriter::close_message() {
  if (!message_) return;
  json& item = output_[*message_];
  const json part = {{"type", "output_text"}, {"text", text_}, {"annotations", json::array()}};
  item["content"] = json::array({part});
  item["status"] = finish_ == "length" ? "incomplete" : "completed";
  event("response.output_text.done",
        {{"item_id", item["id"]}, {"output_index", *message_}, {"content_index", 0}, {"text", text_}});
  event("response.content_part.done",
        {{"item_id", item["id"]}, {"output_index", *message_}, {"content_index", 0}, {"part", part}});
  event("response.output_item.done", {{"output_index", *message_}, {"item", item}});
  message_.reset();
  text_.clear();
}

void ResponsesWriter::reasoning_part(const std::string& piece) {
  if (piece.empty()) return;
  if (!reasoning_) {
    close_message();
    reasoning_ = output_.size();
    output_.push_back({{"type", "reasoning"},
                       {"id", random_id("rs_")},
                       {"status", "in_progress"},
                       {"summary", json::array()},
                       {"content", json::array()}});
    event("response.output_item.added", {{"output_index", *reasoning_}, {"item", output_.back()}});
  }
  reasoning_text_ += piece;
  event(
      "response.reasoning_text.delta",
      {{"item_id", output_[*reasoning_]["id"]}, {"output_index", *reasoning_}, {"content_index", 0}, {"delta", piece}});
}

void ResponsesWriter::close_reasoning() {
  if (!reasoning_) return;
  json& item = output_[*reasoning_];
  item["content"] = json::array({{{"type", "reasoning_text"}, {"text", reasoning_text_}}});
  item["status"] = "completed";
  event("response.reasoning_text.done",
        {{"item_id", item["id"]}, {"output_index", *reasoning_}, {"content_index", 0}, {"text", reasoning_text_}});
  event("response.output_item.done", {{"output_index", *reasoning_}, {"item", item}});
  reasoning_.reset();
  reasoning_text_.clear();
}

void ResponsesWriter::text_part(const std::string& piece) {
  if (piece.empty()) return;
  close_reasoning();
  open_message();
  text_ += piece;
  event("response.output_text.delta",
        {{"item_id", output_[*message_]["id"]}, {"output_index", *message_}, {"content_index", 0}, {"delta", piece}});
}

// A call opens a function_call item (its name first), its arguments follow, its end completes it.
void ResponsesWriter::tool_call_part(const OutputPart& part) {
  if (part.kind == PartKind::kToolCallBegin) {
    close_reasoning();
    close_message();
    output_.push_back({{"type", "function_call"},
                       {"id", random_id("fc_")},
                       {"call_id", call_id_prefix_ + std::to_string(part.tool_index)},
                       {"name", part.text},
                       {"arguments", ""},
                       {"status", "in_progress"}});
    event("response.output_item.added", {{"output_index", output_.size() - 1}, {"item", output_.back()}});
    return;
  }
  json& item = output_.back();
  const size_t at = output_.size() - 1;
  if (part.kind == PartKind::kToolCallArguments) {
    item["arguments"] = item["arguments"].get<std::string>() + part.text;
    event("response.function_call_arguments.delta",
          {{"item_id", item["id"]}, {"output_index", at}, {"delta", part.text}});
    return;
  }
  item["status"] = "completed";
  event("response.function_call_arguments.done",
        {{"item_id", item["id"]}, {"output_index", at}, {"arguments", item["arguments"]}});
  event("response.output_item.done", {{"output_index", at}, {"item", item}});
}

// A choice's events in order; its last gives its calls first, then its text, then the end.
void ResponsesWriter::render(const StreamEvent& ev) {
  const auto is_call = [](const OutputPart& p) { return p.kind != PartKind::kText && p.kind != PartKind::kReasoning; };
  const bool only_reasoning =
      !ev.parts.empty() &&
      std::all_of(ev.parts.begin(), ev.parts.end(), [](const OutputPart& p) { return p.kind == PartKind::kReasoning; });
  if (only_reasoning) reasoning_tokens_ += int64_t(ev.tokens.size());
  if (!ev.finished) {
    for (const OutputPart& part : ev.parts)
      if (part.kind == PartKind::kReasoning)
        reasoning_part(part.text);
      else if (part.kind == PartKind::kText)
        text_part(part.text);
      else
        tool_call_part(part);
    return;
  }
  reasoning_part(reasoning_text(ev.parts));
  for (const OutputPart& part : ev.parts)
    if (is_call(part)) tool_call_part(part);
  text_part(answer_text(ev.parts));
  finish_ = finish_reason_name(ev.finish_reason);
  close_reasoning();
  close_message();
  usage_ = {{"input_tokens", tally_.prompt_tokens()},
            {"input_tokens_details", {{"cached_tokens", tally_.cached_tokens()}}},
            {"output_tokens", tally_.completion_tokens()},
            {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens_}}},
            {"total_tokens", tally_.prompt_tokens() + tally_.completion_tokens()}};
}

ReplyChunk ResponsesWriter::consume(const StreamEvent& ev, size_t index) {
  out_.clear();
  if (!started_) {
    started_ = true;
    event("response.created", {{"response", base_response("in_progress")}});
    event("response.in_progress", {{"response", base_response("in_progress")}});
  }
  tally_.observe(ev, index);
  render(ev);
  ReplyChunk chunk;
  chunk.complete = tally_.whole();
  chunk.prompt_tokens = tally_.prompt_tokens();
  chunk.completion_tokens = tally_.completion_tokens();
  if (chunk.complete) {
    close_reasoning();
    close_message();
    const bool failed = tally_.status() >= 400 || !ev.error.empty();
    const bool cut = finish_ == "length";
    response_ = base_response(failed ? "failed" : cut ? "incomplete" : "completed");
    if (cut) response_["incomplete_details"] = {{"reason", "max_output_tokens"}};
    if (failed) response_["error"] = {{"code", "server_error"}, {"message", ev.error}};
    event(failed ? "response.failed" : cut ? "response.incomplete" : "response.completed", {{"response", response_}});
    chunk.status = stream_ ? 200 : tally_.status();
    if (!stream_) out_ = response_.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  chunk.bytes = std::move(out_);
  out_.clear();
  return chunk;
}

json ResponsesWriter::output_messages() const {
  json messages = json::array();
  std::string reasoning;  // a reasoning item's text: the next assistant turn's reasoning_content
  const auto with_reasoning = [&](json m) {
    if (!reasoning.empty()) m["reasoning_content"] = std::exchange(reasoning, "");
    return m;
  };
  for (const json& item : output_) {
    if (item["type"] == "reasoning") {
      if (!item["content"].empty()) reasoning += item["content"][0]["text"].get<std::string>();
      continue;
    }
    if (item["type"] == "message") {
      messages.push_back(with_reasoning({{"role", "assistant"}, {"content", item["content"][0]["text"]}}));
      continue;
    }
    json call = {{"id", item["call_id"]},
                 {"type", "function"},
                 {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
    if (!messages.empty() && messages.back()["role"] == "assistant" && !messages.back().contains("tool_calls"))
      messages.back()["tool_calls"] = json::array({call});
    else if (!messages.empty() && messages.back().contains("tool_calls"))
      messages.back()["tool_calls"].push_back(call);
    else
      messages.push_back(
          with_reasoning({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}}));
  }
  return messages;
}

}  // namespace autoglm
