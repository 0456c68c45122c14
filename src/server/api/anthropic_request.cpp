#include "server/api/anthropic_request.h"

#include "server/api/openai_request.h"

#include <utility>

namespace autoglm {
namespace {

std::string at(const std::string& where, size_t i) {
  return where + "." + std::to_string(i);
}

const json& required(const json& obj, const char* name, const std::string& where) {
  if (!obj.contains(name) || obj[name].is_null()) bad(where + "." + name, "Field required");
  return obj[name];
}

std::string required_string(const json& obj, const char* name, const std::string& where) {
  const json& v = required(obj, name, where);
  if (!v.is_string()) bad(where + "." + name, "must be a string");
  return check_utf8(v.get<std::string>(), where + "." + name);
}

// A content block's type, checked to be an object with a string type.
std::string block_type(const json& block, const std::string& where) {
  if (!block.is_object()) bad(where, "a content block must be an object");
  return required_string(block, "type", where);
}

[[noreturn]] void unsupported_block(const std::string& type, const std::string& where, const char* allowed) {
  if (type == "document")
    bad(where + ".type",
        "'document' blocks are not supported: the models served here read "
        "text and images");
  bad(where + ".type", "unknown content block type '" + type + "' (" + allowed + ")");
}

// Text of a string or a list of text blocks (system, a tool_result's content).
std::string text_blocks(const json& content, const std::string& where) {
  if (content.is_string()) return check_utf8(content.get<std::string>(), where);
  if (!content.is_array()) bad(where, "must be a string or a list of text blocks");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string type = block_type(content[i], at(where, i));
    if (type != "text") unsupported_block(type, at(where, i), "text");
    text += required_string(content[i], "text", at(where, i));
  }
  return text;
}

// An image block's source as a URL: base64 data as a data: URL, or its url.
std::string image_source_url(const json& block, const std::string& where) {
  const json& source = required(block, "source", where);
  const std::string w = where + ".source";
  if (!source.is_object()) bad(w, "must be an object");
  const std::string type = required_string(source, "type", w);
  if (type == "base64")
    return "data:" + required_string(source, "media_type", w) + ";base64," + required_string(source, "data", w);
  if (type == "url") return required_string(source, "url", w);
  bad(w + ".type", "image source type '" + type + "' is not supported (base64, url)");
}

// A user message of text and image parts: a string when it has no image.
json user_content(const std::string& text, json& images) {
  if (images.empty()) return text;
  json parts = std::exchange(images, json::array());
  if (!text.empty()) parts.push_back({{"type", "text"}, {"text", text}});
  return parts;
}

// A user turn: its text and images as a user message; each tool_result as a tool message, in order.
void add_user_turn(const json& content, const std::string& where, json& messages) {
  if (content.is_string()) {
    messages.push_back({{"role", "user"}, {"content", check_utf8(content.get<std::string>(), where)}});
    return;
  }
  if (!content.is_array()) bad(where, "must be a string or a list of content blocks");
  std::string text;
  json parts = json::array();  // in order: text before an image goes in as its own part
  bool any_result = false;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& block = content[i];
    const std::string w = at(where, i), type = block_type(block, w);
    if (type == "text") {
      text += required_string(block, "text", w);
    } else if (type == "image") {
      if (!text.empty()) parts.push_back({{"type", "text"}, {"text", std::exchange(text, "")}});
      parts.push_back(image_url_part(image_source_url(block, w)));
    } else if (type == "tool_result") {
      if (!text.empty() || !parts.empty())
        messages.push_back({{"role", "user"}, {"content", user_content(std::exchange(text, ""), parts)}});
      const std::string id = required_string(block, "tool_use_id", w);
      const std::string result = block.contains("content") ? text_blocks(block["content"], w + ".content") : "";
      if (block.contains("is_error") && !block["is_error"].is_boolean()) bad(w + ".is_error", "must be a boolean");
      messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", result}});
      any_result = true;
    } else {
      unsupported_block(type, w, "text, image, tool_result");
    }
  }
  if (!text.empty() || !parts.empty() || !any_result)
    messages.push_back({{"role", "user"}, {"content", user_content(text, parts)}});
}

// An assistant turn: text as content, thinking as reasoning_content, tool_use as tool calls.
void add_assistant_turn(const json& content, const std::string& where, json& messages) {
  if (content.is_string()) {
    messages.push_back({{"role", "assistant"}, {"content", check_utf8(content.get<std::string>(), where)}});
    return;
  }
  if (!content.is_array()) bad(where, "must be a string or a list of content blocks");
  std::string text, reasoning;
  json calls = json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const json& block = content[i];
    const std::string w = at(where, i), type = block_type(block, w);
    if (type == "text") {
      text += required_string(block, "text", w);
    } else if (type == "thinking") {
      reasoning += required_string(block, "thinking", w);
    } else if (type == "redacted_thinking") {
      continue;  // another service's encrypted thinking: nothing a local model can read
    } else if (type == "tool_use") {
      const std::string id = required_string(block, "id", w), name = required_string(block, "name", w);
      const json& input = required(block, "input", w);
      if (!input.is_object()) bad(w + ".input", "must be an object");
      calls.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", input.dump()}}}});
    } else {
      unsupported_block(type, w, "text, thinking, redacted_thinking, tool_use");
    }
  }
  json m = {{"role", "assistant"}, {"content", text}};
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  if (!calls.empty()) m["tool_calls"] = calls;
  messages.push_back(std::move(m));
}

json chat_messages(const json& body) {
  json messages = json::array();
  if (body.contains("system") && !body["system"].is_null())
    messages.push_back({{"role", "system"}, {"content", text_blocks(body["system"], "system")}});
  const json& list = required(body, "messages", "");
  if (!list.is_array() || list.empty()) bad("messages", "must be a non-empty list of messages");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string w = at("messages", i);
    if (!list[i].is_object()) bad(w, "a message must be an object");
    const std::string role = required_string(list[i], "role", w);
    const json& content = required(list[i], "content", w);
    if (role == "user")
      add_user_turn(content, w + ".content", messages);
    else if (role == "assistant")
      add_assistant_turn(content, w + ".content", messages);
    else
      bad(w + ".role", "must be 'user' or 'assistant' (the system prompt is the top-level 'system')");
  }
  return messages;
}

json chat_tools(const json& tools) {
  if (!tools.is_array()) bad("tools", "must be a list of tools");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string w = at("tools", i);
    if (!t.is_object()) bad(w, "a tool must be an object");
    if (t.contains("type") && !t["type"].is_null() && t["type"] != "custom")
      bad(w + ".type", "'" + (t["type"].is_string() ? t["type"].get<std::string>() : t["type"].dump()) +
                           "' is not supported: only client tools (name, description, input_schema) are");
    const std::string name = required_string(t, "name", w);
    if (name.empty()) bad(w + ".name", "must not be empty");
    const json& schema = required(t, "input_schema", w);
    if (!schema.is_object()) bad(w + ".input_schema", "must be a JSON Schema object");
    json fn = {{"name", name}, {"parameters", schema}};
    if (t.contains("description") && !t["description"].is_null()) {
      if (!t["description"].is_string()) bad(w + ".description", "must be a string");
      fn["description"] = t["description"];
    }
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

// tool_choice {"type": auto|any|tool|none, "name", "disable_parallel_tool_use"} into chat's.
void read_tool_choice(const json& c, json& chat) {
  if (!c.is_object()) bad("tool_choice", "must be an object with a 'type'");
  const std::string type = required_string(c, "type", "tool_choice");
  if (type == "auto" || type == "none") {
    chat["tool_choice"] = type;
  } else if (type == "any") {
    chat["tool_choice"] = "required";
  } else if (type == "tool") {
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", required_string(c, "name", "tool_choice")}}}};
  } else {
    bad("tool_choice.type", "must be auto, any, tool or none");
  }
  if (c.contains("disable_parallel_tool_use") && !c["disable_parallel_tool_use"].is_null()) {
    if (!c["disable_parallel_tool_use"].is_boolean()) bad("tool_choice.disable_parallel_tool_use", "must be a boolean");
    if (type != "none") chat["parallel_tool_calls"] = !c["disable_parallel_tool_use"].get<bool>();
  }
}

// thinking {"type": "enabled", "budget_tokens"} | {"type": "disabled"} | {"type": "adaptive"}:
// the template's enable_thinking, and the budget after which the thinking is closed.
void read_thinking(const json& t, const json& max_tokens, json& chat) {
  if (!t.is_object()) bad("thinking", "must be an object with a 'type'");
  const std::string type = required_string(t, "type", "thinking");
  json kwargs = chat.value("chat_template_kwargs", json::object());
  if (type == "enabled") {
    const json& budget = required(t, "budget_tokens", "thinking");
    if (!budget.is_number_integer() || budget.get<int64_t>() < 1)
      bad("thinking.budget_tokens", "must be a positive integer");
    if (max_tokens.is_number_integer() && budget.get<int64_t>() >= max_tokens.get<int64_t>())
      bad("thinking.budget_tokens", "must be less than max_tokens (" + max_tokens.dump() + ")");
    kwargs["enable_thinking"] = true;
    chat["thinking_budget_tokens"] = budget;
  } else if (type == "disabled") {
    kwargs["enable_thinking"] = false;
  } else if (type != "adaptive") {
    bad("thinking.type", "must be enabled, disabled or adaptive");
  }
  chat["chat_template_kwargs"] = kwargs;
}

json stop_sequences(const json& s) {
  if (!s.is_array()) bad("stop_sequences", "must be a list of strings");
  for (size_t i = 0; i < s.size(); ++i)
    if (!s[i].is_string()) bad(at("stop_sequences", i), "must be a string");
  return s;
}

}  // namespace

json anthropic_to_chat(const json& body, bool count_only) {
  json chat = {{"messages", chat_messages(body)}};
  const json max_tokens = body.value("max_tokens", json());
  if (!count_only) {
    if (max_tokens.is_null()) bad("max_tokens", "Field required");
    if (!max_tokens.is_number_integer() || max_tokens.get<int64_t>() < 1)
      bad("max_tokens", "must be a positive integer");
    chat["max_tokens"] = max_tokens;
  }
  for (const char* k : {"model", "temperature", "top_p", "top_k"})
    if (body.contains(k)) chat[k] = body[k];
  copy_chat_extensions(body, chat);  // `thinking` below sets its own kwargs and budget
  if (body.contains("stream") && !body["stream"].is_null()) {
    if (!body["stream"].is_boolean()) bad("stream", "must be a boolean");
    chat["stream"] = body["stream"];
  }
  if (body.contains("stop_sequences") && !body["stop_sequences"].is_null())
    chat["stop"] = stop_sequences(body["stop_sequences"]);
  if (body.contains("metadata") && !body["metadata"].is_null()) {
    const json& m = body["metadata"];
    if (!m.is_object()) bad("metadata", "must be an object");
    if (m.contains("user_id") && !m["user_id"].is_null()) {
      if (!m["user_id"].is_string()) bad("metadata.user_id", "must be a string");
      chat["user"] = m["user_id"];
    }
  }
  if (body.contains("tools") && !body["tools"].is_null()) chat["tools"] = chat_tools(body["tools"]);
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    if (!chat.contains("tools")) bad("tool_choice", "needs 'tools'");
    read_tool_choice(body["tool_choice"], chat);
  }
  if (body.contains("thinking") && !body["thinking"].is_null()) read_thinking(body["thinking"], max_tokens, chat);
  return chat;
}

std::string anthropic_param(const std::string& p) {
  auto starts = [&](const char* prefix) { return p.rfind(prefix, 0) == 0; };
  if (starts("messages[")) return "messages";
  if (p == "stop") return "stop_sequences";
  if (p == "user") return "metadata.user_id";
  if (p == "chat_template_kwargs") return "thinking";
  if (p == "thinking_budget_tokens") return "thinking.budget_tokens";
  if (p == "parallel_tool_calls") return "tool_choice.disable_parallel_tool_use";
  if (starts("tools[")) {
    const size_t close = p.find(']');
    std::string out = "tools." + p.substr(6, close - 6);
    const std::string rest = close == std::string::npos ? "" : p.substr(close + 1);
    if (rest.rfind(".function.parameters", 0) == 0) return out + ".input_schema" + rest.substr(20);
    if (rest.rfind(".function", 0) == 0) return out + rest.substr(9);
    return out + rest;
  }
  return p;
}

}  // namespace autoglm
