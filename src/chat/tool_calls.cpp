#include "chat/tool_calls.h"

#include <algorithm>

#include "chat/partial_marker.h"
#include "core/json_brackets.h"
#include "sample/json_schema.h"

namespace autoglm {
namespace {

using nlohmann::json;

const char kHermesOpen[] = "<tool_call>";
const char kHermesClose[] = "</tool_call>";
const char kPythonTag[] = "<|python_tag|>";
const std::string kDsCallsBegin = "<｜tool▁calls▁begin｜>", kDsCallsEnd = "<｜tool▁calls▁end｜>";
const std::string kDsCallBegin = "<｜tool▁call▁begin｜>", kDsCallEnd = "<｜tool▁call▁end｜>";
const std::string kDsSep = "<｜tool▁sep｜>";

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// Whole JSON values in `text`, one after another (separated by whitespace or ';').
std::vector<json> json_values(const std::string& text) {
  std::vector<json> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (std::isspace(static_cast<unsigned char>(text[i])) || text[i] == ';')) ++i;
    if (i >= text.size()) break;
    // The value ends where its brackets close.
    const size_t j = scan_json_brackets(text, i, [](size_t, int depth) { return depth != 0; });
    if (j >= text.size()) return {};
    try {
      out.push_back(json::parse(text.substr(i, j + 1 - i)));
    } catch (const json::exception&) {
      return {};
    }
    i = j + 1;
  }
  return out;
}

}  // namespace

ToolCallFamily tool_call_family(const std::string& t) {
  if (template_is_harmony(t)) return ToolCallFamily::kHarmony;
  // DeepSeek V3.1's calls: the arguments right after the separator (R1's put a ```json block there).
  if (t.find(kDsSep) != std::string::npos && t.find("```json") == std::string::npos)
    return ToolCallFamily::kDeepSeekV31;
  if (t.find("<arg_key>") != std::string::npos)  // GLM-4.5+: 4.7 writes no newline before a key
    return t.find("\n<arg_key>") != std::string::npos ? ToolCallFamily::kGlm45 : ToolCallFamily::kGlm47;
  if (t.find("<function=") != std::string::npos && t.find("<parameter=") != std::string::npos)
    return ToolCallFamily::kQwen3Coder;
  if (t.find("<tool_call>") != std::string::npos) return ToolCallFamily::kHermes;
  if (t.find("<|start_header_id|>") != std::string::npos) return ToolCallFamily::kLlama3;  // Llama 3.x
  if (t.find("<|observation|>") != std::string::npos || t.find("[gMASK]") != std::string::npos)
    return ToolCallFamily::kGlm4;
  return ToolCallFamily::kHermes;
}

const char* tool_call_family_name(ToolCallFamily f) {
  switch (f) {
    case ToolCallFamily::kHermes: return "hermes";
    case ToolCallFamily::kLlama3: return "llama3";
    case ToolCallFamily::kGlm4: return "glm4";
    case ToolCallFamily::kGlm45: return "glm45";
    case ToolCallFamily::kGlm47: return "glm47";
    case ToolCallFamily::kQwen3Coder: return "qwen3coder";
    case ToolCallFamily::kDeepSeekV31: return "deepseek_v3_1";
    case ToolCallFamily::kHarmony: return "harmony";
  }
  return "hermes";
}

namespace {

constexpr ToolCallFamily kFamilies[] = {
    ToolCallFamily::kHermes, ToolCallFamily::kLlama3,     ToolCallFamily::kGlm4,        ToolCallFamily::kGlm45,
    ToolCallFamily::kGlm47,  ToolCallFamily::kQwen3Coder, ToolCallFamily::kDeepSeekV31, ToolCallFamily::kHarmony};

}  // namespace

std::optional<ToolCallFamily> tool_call_family_from_name(const std::string& name) {
  for (ToolCallFamily f : kFamilies)
    if (name == tool_call_family_name(f)) return f;
  return std::nullopt;
}

std::vector<std::string> tool_call_format_names() {
  std::vector<std::string> names;
  for (ToolCallFamily f : kFamilies) names.emplace_back(tool_call_family_name(f));
  return names;
}

std::vector<std::string> tool_call_markers(ToolCallFamily family) {
  if (family == ToolCallFamily::kHarmony) return {std::begin(kHarmonyMarkers), std::end(kHarmonyMarkers)};
  if (family == ToolCallFamily::kDeepSeekV31) return {kDsCallsBegin, kDsCallsEnd, kDsCallBegin, kDsCallEnd, kDsSep};
  return {};
}

std::vector<std::string> tool_function_names(const nlohmann::ordered_json& tools) {
  std::vector<std::string> names;
  for (const auto& tool : tools)
    if (tool.contains("function") && tool["function"].contains("name") && tool["function"]["name"].is_string())
      names.push_back(tool["function"]["name"].get<std::string>());
  return names;
}

ToolCallParser::ToolCallParser(ToolCallFamily family, std::vector<std::string> tool_names, std::string id_prefix)
    : family_(family), names_(std::move(tool_names)), id_prefix_(std::move(id_prefix)) {
  if (family_ == ToolCallFamily::kHarmony) harmony_ = std::make_unique<HarmonyParser>(id_prefix_);
}

bool ToolCallParser::add_call(const json& j, Output& out) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  json args = j.contains("arguments") ? j["arguments"] : j.value("parameters", json::object());
  ToolCall call;
  call.id = id_prefix_ + std::to_string(calls_.size());
  call.name = j["name"];
  // Model text need not be valid UTF-8 (byte-fallback tokens): a bad byte becomes U+FFFD, never a throw.
  call.arguments =
      args.is_string() ? args.get<std::string>() : args.dump(-1, ' ', false, json::error_handler_t::replace);
  calls_.push_back(call);
  out.calls.push_back(call);
  return true;
}

void ToolCallParser::set_tools(const json& tools) {
  for (const auto& t : tools)
    if (t.contains("function") && t["function"].contains("name") && t["function"]["name"].is_string())
      parameters_[t["function"]["name"].get<std::string>()] = t["function"].value("parameters", json::object());
}

namespace {

// Calls in <tool_call> tags: hermes and glm45/47 (whose bodies differ).
bool tagged_calls(ToolCallFamily f) {
  return f == ToolCallFamily::kHermes || f == ToolCallFamily::kGlm45 || f == ToolCallFamily::kGlm47 ||
         f == ToolCallFamily::kQwen3Coder;
}

// The text between `open` and `close` starting at `at` (whitespace before `open` skipped);
// npos when it is not there. `at` moves past `close`.
size_t tag_value(const std::string& text, size_t& at, const std::string& open, const std::string& close,
                 std::string& value) {
  size_t i = text.find_first_not_of(" \t\r\n", at);
  if (i == std::string::npos || text.compare(i, open.size(), open) != 0) return std::string::npos;
  i += open.size();
  const size_t end = text.find(close, i);
  if (end == std::string::npos) return std::string::npos;
  value = text.substr(i, end - i);
  at = end + close.size();
  return end;
}

}  // namespace

json ToolCallParser::argument_value(const std::string& function, const std::string& key,
                                    const std::string& value) const {
  const json params = parameters_.value(function, json::object());
  const json prop = params.value("properties", json::object()).value(key, json::object());
  const json type = prop.value("type", json());
  if (type == "string") return value;
  if (type == "boolean" && (value == "True" || value == "False")) return value == "True";  // Python's str()
  json parsed = json::parse(value, nullptr, false);
  return parsed.is_discarded() ? json(value) : parsed;
}

json ToolCallParser::glm_call(const std::string& body) const {
  const size_t first_key = body.find("<arg_key>");
  const std::string name = trim(body.substr(0, first_key));
  if (name.empty() || name.find_first_of("<>\n") != std::string::npos) return nullptr;
  json args = json::object();
  size_t at = first_key == std::string::npos ? body.size() : first_key;
  while (body.find_first_not_of(" \t\r\n", at) != std::string::npos) {
    std::string key, value;
    if (tag_value(body, at, "<arg_key>", "</arg_key>", key) == std::string::npos ||
        tag_value(body, at, "<arg_value>", "</arg_value>", value) == std::string::npos)
      return nullptr;
    key = trim(key);
    args[key] = argument_value(name, key, value);
  }
  return json{{"name", name}, {"arguments", args}};
}

// <function=name> then <parameter=key>\nvalue\n</parameter> each, then </function>.
json ToolCallParser::qwen3_coder_call(const std::string& body) const {
  const std::string text = trim(body);
  const std::string open = "<function=", close = "</function>";
  if (text.compare(0, open.size(), open) != 0 || text.size() < open.size() + close.size() ||
      text.compare(text.size() - close.size(), close.size(), close) != 0)
    return nullptr;
  const size_t name_end = text.find('>');
  const std::string name = text.substr(open.size(), name_end - open.size());
  if (name.empty() || name.find_first_of("<\n") != std::string::npos) return nullptr;
  const std::string inner = text.substr(name_end + 1, text.size() - close.size() - name_end - 1);
  json args = json::object();
  size_t at = 0;
  while (inner.find_first_not_of(" \t\r\n", at) != std::string::npos) {
    const size_t p = inner.find_first_not_of(" \t\r\n", at);
    if (inner.compare(p, 11, "<parameter=") != 0) return nullptr;
    const size_t key_end = inner.find('>', p);
    const size_t end = key_end == std::string::npos ? key_end : inner.find("</parameter>", key_end);
    if (end == std::string::npos) return nullptr;
    const std::string key = inner.substr(p + 11, key_end - p - 11);
    std::string value = inner.substr(key_end + 1, end - key_end - 1);
    if (!value.empty() && value.front() == '\n') value.erase(0, 1);  // the template's own newlines
    if (!value.empty() && value.back() == '\n') value.pop_back();
    args[key] = argument_value(name, key, value);
    at = end + 12;
  }
  return json{{"name", name}, {"arguments", args}};
}

ToolCallParser::Output ToolCallParser::push(const std::string& text) {
  if (harmony_) return from_harmony(harmony_->push(text));
  pending_ += text;
  if (family_ == ToolCallFamily::kDeepSeekV31) return parse_deepseek(false, false);
  return tagged_calls(family_) ? parse_hermes(false, false) : parse_whole_message(false, false);
}

ToolCallParser::Output ToolCallParser::finish(bool cut_short) {
  if (harmony_) return from_harmony(harmony_->finish(cut_short));
  if (family_ == ToolCallFamily::kDeepSeekV31) return parse_deepseek(true, cut_short);
  return tagged_calls(family_) ? parse_hermes(true, cut_short) : parse_whole_message(true, cut_short);
}

// Harmony's calls and answer text (its reasoning is not content).
ToolCallParser::Output ToolCallParser::from_harmony(HarmonyParser::Output h) {
  Output out;
  out.content = std::move(h.content);
  out.calls = std::move(h.calls);
  calls_.insert(calls_.end(), out.calls.begin(), out.calls.end());
  return out;
}

// Content runs until <｜tool▁calls▁begin｜>; inside, each <｜tool▁call▁begin｜>name<｜tool▁sep｜>
// arguments<｜tool▁call▁end｜> is released when it closes; <｜tool▁calls▁end｜> ends them.
ToolCallParser::Output ToolCallParser::parse_deepseek(bool final, bool cut_short) {
  Output out;
  for (;;) {
    if (!in_calls_) {
      const size_t open = pending_.find(kDsCallsBegin);
      const size_t end = open == std::string::npos ? pending_.size() : open;
      const size_t hold =
          open != std::string::npos || (final && !cut_short) ? 0 : partial_marker(pending_, kDsCallsBegin);
      out.content += pending_.substr(0, end - hold);
      pending_.erase(0, end - hold);
      if (open == std::string::npos) {
        if (final) pending_.clear();
        return out;
      }
      pending_.erase(0, kDsCallsBegin.size());
      in_calls_ = true;
    }
    const size_t next = pending_.find_first_not_of(" \t\r\n");
    if (next == std::string::npos) {
      if (final) pending_.clear();
      return out;
    }
    if (pending_.compare(next, kDsCallsEnd.size(), kDsCallsEnd) == 0) {
      pending_.erase(0, next + kDsCallsEnd.size());
      in_calls_ = false;
      continue;
    }
    const size_t close = pending_.find(kDsCallEnd, next);
    if (close == std::string::npos) {
      if (final) {  // an unfinished call: given back as text, unless cut short
        if (!cut_short && pending_.compare(next, kDsCallBegin.size(), kDsCallBegin) != 0) out.content += pending_;
        pending_.clear();
      }
      return out;
    }
    std::string body = pending_.substr(next, close - next);
    const bool framed = body.compare(0, kDsCallBegin.size(), kDsCallBegin) == 0;
    if (framed) body.erase(0, kDsCallBegin.size());
    const size_t sep = body.find(kDsSep);
    bool added = false;
    if (framed && sep != std::string::npos) {
      const auto values = json_values(trim(body.substr(sep + kDsSep.size())));
      added = values.size() == 1 && values[0].is_object() &&
              add_call(json{{"name", trim(body.substr(0, sep))}, {"arguments", values[0]}}, out);
    }
    if (!added) out.content += pending_.substr(next, close + kDsCallEnd.size() - next);
    pending_.erase(0, close + kDsCallEnd.size());
  }
}

// Content runs until <tool_call>; each call is released when its </tool_call> arrives (hermes:
// JSON between the tags; glm45/47: the name, then key and value tags).
ToolCallParser::Output ToolCallParser::parse_hermes(bool final, bool cut_short) {
  Output out;
  for (;;) {
    if (after_call_) {  // the whitespace between calls is not content
      const size_t keep = pending_.find_first_not_of(" \t\r\n");
      pending_.erase(0, keep == std::string::npos ? pending_.size() : keep);
      if (pending_.empty()) return out;
      after_call_ = false;
    }
    const size_t open = pending_.find(kHermesOpen);
    if (open == std::string::npos) {
      const size_t hold = final && !cut_short ? 0 : partial_marker(pending_, kHermesOpen);
      out.content += pending_.substr(0, pending_.size() - hold);
      pending_.erase(0, pending_.size() - hold);
      if (final) pending_.clear();
      return out;
    }
    out.content += pending_.substr(0, open);
    pending_.erase(0, open);
    const size_t close = pending_.find(kHermesClose);
    if (close == std::string::npos) {
      if (final) {  // an unfinished call: given back as text rather than lost, unless cut short
        if (!cut_short) out.content += pending_;
        pending_.clear();
      }
      return out;
    }
    const std::string body = pending_.substr(std::string(kHermesOpen).size(), close - std::string(kHermesOpen).size());
    bool added = false;
    if (family_ == ToolCallFamily::kHermes) {
      const auto values = json_values(trim(body));
      added = values.size() == 1 && add_call(values[0], out);
    } else {
      added = add_call(family_ == ToolCallFamily::kQwen3Coder ? qwen3_coder_call(body) : glm_call(body), out);
    }
    if (!added) out.content += pending_.substr(0, close + std::string(kHermesClose).size());
    pending_.erase(0, close + std::string(kHermesClose).size());
    after_call_ = true;
  }
}

// Llama 3 and GLM-4 write a call as the whole message: decide from its start whether it may
// be one; if so hold everything to the end and parse it then.
ToolCallParser::Output ToolCallParser::parse_whole_message(bool final, bool cut_short) {
  Output out;
  if (!in_message_mode_decided_) {
    const std::string head = trim(pending_);
    bool decided = false, maybe_call = false;
    if (family_ == ToolCallFamily::kLlama3) {
      if (!head.empty()) {
        decided = head[0] != '{' && head.compare(0, std::min(head.size(), sizeof(kPythonTag) - 1), kPythonTag, 0,
                                                 std::min(head.size(), sizeof(kPythonTag) - 1)) != 0;
        maybe_call = !decided;
        if (maybe_call && (head[0] == '{' || head.size() >= sizeof(kPythonTag) - 1)) decided = true;
      }
    } else {  // glm4: the first line names a tool
      const size_t nl = pending_.find('\n');
      const std::string first = trim(nl == std::string::npos ? pending_ : pending_.substr(0, nl));
      const bool is_name = std::find(names_.begin(), names_.end(), first) != names_.end();
      const bool could_be =
          std::any_of(names_.begin(), names_.end(), [&](const std::string& n) { return n.rfind(first, 0) == 0; });
      if (nl != std::string::npos || !could_be) {
        decided = true;
        maybe_call = is_name && nl != std::string::npos;
      }
    }
    if (decided || final) {
      in_message_mode_decided_ = true;
      message_is_call_ = maybe_call;
    }
  }
  if (in_message_mode_decided_ && !message_is_call_) {
    out.content = pending_;
    pending_.clear();
    return out;
  }
  if (!final) return out;  // a call: wait for the whole message
  std::string text = trim(pending_);
  pending_.clear();
  bool parsed = false;
  if (family_ == ToolCallFamily::kLlama3) {
    if (text.rfind(kPythonTag, 0) == 0) text = trim(text.substr(sizeof(kPythonTag) - 1));
    const auto values = json_values(text);
    parsed = !values.empty();
    Output tmp;
    for (const json& v : values) parsed = parsed && add_call(v, tmp);
    if (parsed) out.calls = tmp.calls;
  } else {
    const size_t nl = text.find('\n');
    const auto values = nl == std::string::npos ? std::vector<json>{} : json_values(trim(text.substr(nl + 1)));
    if (values.size() == 1 && values[0].is_object())
      parsed = add_call(json{{"name", trim(text.substr(0, nl))}, {"arguments", values[0]}}, out);
  }
  if (!parsed) {
    calls_.resize(calls_.size() - out.calls.size());
    out.calls.clear();
    out.content = cut_short ? "" : text;
  }
  return out;
}

json tool_arguments_schema(const json& parameters) {
  if (!parameters.is_object() || parameters.contains("additionalProperties")) return parameters;
  const bool object = parameters.value("type", json()) == "object" ||
                      (!parameters.contains("type") && parameters.contains("properties"));
  if (!object) return parameters;
  json out = parameters;
  out["additionalProperties"] = false;
  return out;
}

namespace {

// One glm45/47 or qwen3coder call of `name` whose arguments its parameter schema allows: the required keys in
// order, then each optional one or not; a string's value raw (no '<'), any other value JSON
// under the property's schema. Its rules are added to `rules`.
Result<std::string> glm_call_grammar(ToolCallFamily family, const std::string& name, const json& parameters,
                                     const std::string& prefix, std::string& rules) {
  const std::string nl = family == ToolCallFamily::kGlm45 ? gbnf_literal("\n") + " " : "";
  const json properties = parameters.value("properties", json::object());
  const json required = parameters.value("required", json::array());
  if (!properties.is_object()) return invalid_argument("tools: '" + name + "': 'properties' must be an object");
  std::string args;
  int k = 0;
  auto add = [&](const std::string& key, const json& schema, bool optional) -> Status {
    const std::string value_rule = prefix + "v" + std::to_string(k++) + "-";
    std::string value;
    if (schema.value("type", json()) == "string" && !schema.contains("enum") && !schema.contains("const")) {
      rules += value_rule + "root ::= [^<]*\n";
      value = value_rule + "root";
    } else {
      AUTOGLM_ASSIGN_OR_RETURN(std::string gbnf, json_schema_to_gbnf(schema, value_rule));
      rules += gbnf;
      value = value_rule + "root";
    }
    const std::string arg =
        family == ToolCallFamily::kQwen3Coder
            ? gbnf_literal("<parameter=" + key + ">\n") + " " + value + " " + gbnf_literal("\n</parameter>\n") + " "
            : gbnf_literal("<arg_key>" + key + "</arg_key>") + " " + nl + gbnf_literal("<arg_value>") + " " + value +
                  " " + gbnf_literal("</arg_value>") + " " + nl;
    args += optional ? "( " + arg + ")? " : arg + " ";
    return Status::ok();
  };
  for (const auto& key : required)
    if (key.is_string() && properties.contains(key.get<std::string>()))
      AUTOGLM_RETURN_IF_ERROR(add(key.get<std::string>(), properties[key.get<std::string>()], false));
  for (const auto& [key, schema] : properties.items())
    if (std::find(required.begin(), required.end(), key) == required.end())
      AUTOGLM_RETURN_IF_ERROR(add(key, schema, true));
  if (family == ToolCallFamily::kQwen3Coder)
    return gbnf_literal("<tool_call>\n<function=" + name + ">\n") + " " + args +
           gbnf_literal("</function>\n</tool_call>");
  return gbnf_literal("<tool_call>" + name) + " " + nl + args + gbnf_literal("</tool_call>");
}

}  // namespace

Result<std::string> tool_call_grammar(ToolCallFamily family, const json& tools, const std::string& only) {
  std::string calls, rules;
  int n = 0;
  for (const json& t : tools) {
    const json fn = t.value("function", json());
    const std::string name = fn.value("name", "");
    if (name.empty() || (!only.empty() && name != only)) continue;
    std::string prefix = "t";  // each tool's schema rules apart
    prefix += std::to_string(n++);
    prefix += '-';
    const json parameters = fn.value("parameters", json{{"type", "object"}});
    if (family == ToolCallFamily::kGlm45 || family == ToolCallFamily::kGlm47 || family == ToolCallFamily::kQwen3Coder) {
      AUTOGLM_ASSIGN_OR_RETURN(std::string call, glm_call_grammar(family, name, parameters, prefix, rules));
      calls += (calls.empty() ? "( " : " | ( ") + call + " )";
      continue;
    }
    AUTOGLM_ASSIGN_OR_RETURN(std::string gbnf, json_schema_to_gbnf(tool_arguments_schema(parameters), prefix));
    rules += gbnf;
    const std::string args = prefix + "root";
    std::string call;
    switch (family) {
      case ToolCallFamily::kHermes:
        call = gbnf_literal("<tool_call>\n{\"name\": " + json(name).dump() + ", \"arguments\": ") + " " + args + " " +
               gbnf_literal("}\n</tool_call>");
        break;
      case ToolCallFamily::kLlama3:
        call = gbnf_literal("{\"name\": " + json(name).dump() + ", \"parameters\": ") + " " + args + " " +
               gbnf_literal("}");
        break;
      case ToolCallFamily::kGlm4: call = gbnf_literal(name + "\n") + " " + args; break;
      case ToolCallFamily::kDeepSeekV31:
        call = gbnf_literal(kDsCallsBegin + kDsCallBegin + name + kDsSep) + " " + args + " " +
               gbnf_literal(kDsCallEnd + kDsCallsEnd);
        break;
      case ToolCallFamily::kHarmony:  // a message to the function (after an analysis message, a new header)
        call = "( " + gbnf_literal("<|start|>assistant") + " )? " +
               gbnf_literal("<|channel|>commentary to=functions." + name + " <|constrain|>json<|message|>") + " " +
               args;
        break;
      case ToolCallFamily::kGlm45:
      case ToolCallFamily::kGlm47:
      case ToolCallFamily::kQwen3Coder: break;  // above
    }
    calls += (calls.empty() ? "( " : " | ( ") + call + " )";
  }
  if (calls.empty())
    return invalid_argument(only.empty() ? "no function among 'tools'"
                                         : "tool_choice names '" + only + "', which is not among 'tools'");
  return "root ::= " + calls + "\n" + rules;
}

}  // namespace autoglm
