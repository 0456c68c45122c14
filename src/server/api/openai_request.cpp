#include "server/api/openai_request.h"

#include <charconv>

#include <algorithm>
#include <chrono>

namespace autoglm {

namespace {

// An image part's URL: image_url as {"url": ...} (OpenAI) or as the URL itself (Responses' input_image).
std::string image_part_url(const json& part, const std::string& where) {
  const json& u = part.contains("image_url") ? part["image_url"] : json();
  if (u.is_string()) return check_utf8(u.get<std::string>(), where + ".image_url");
  if (u.is_object() && u.contains("url") && u["url"].is_string())
    return check_utf8(u["url"].get<std::string>(), where + ".image_url.url");
  bad(where + ".image_url", "'" + where + ".image_url' must be {\"url\": \"data:image/...\"} (or the URL)");
}

}  // namespace

json image_url_part(const std::string& url) {
  return {{"type", "image_url"}, {"image_url", {{"url", url}}}};
}

json message_content(const json& content, const std::string& param) {
  if (content.is_null()) return "";
  if (content.is_string()) return check_utf8(content.get<std::string>(), param);
  if (!content.is_array()) bad(param, "'" + param + "' must be a string or an array of text and image parts");
  std::string text;
  json parts = json::array();
  bool images = false;
  for (size_t j = 0; j < content.size(); ++j) {
    const json& part = content[j];
    const std::string where = param + "[" + std::to_string(j) + "]";
    const std::string type = part.is_object() ? string_field(part, "type") : "";
    if (type == "image_url" || type == "input_image") {  // the runtime reads it (or refuses it by name)
      parts.push_back(image_url_part(image_part_url(part, where)));
      images = true;
      continue;
    }
    if ((type != "text" && type != "input_text") || !part.contains("text") || !part["text"].is_string())
      bad(param, "'" + param + "' parts must be {\"type\": \"text\", \"text\": \"...\"} or image_url parts");
    const std::string piece = check_utf8(part["text"].get<std::string>(), param);
    text += piece;
    parts.push_back({{"type", "text"}, {"text", piece}});
  }
  return images ? parts : json(text);
}

namespace {

// {"token id": bias}: ids as decimal strings, biases in [-100, 100]; an entry that is wrong
// is named ("logit_bias.50256"). Ids past the vocabulary are checked against the model later.
std::vector<std::pair<int32_t, float>> logit_bias_param(const json& body) {
  constexpr size_t kMaxEntries = 1024;
  if (!body.contains("logit_bias") || body["logit_bias"].is_null()) return {};
  const json& m = body["logit_bias"];
  if (!m.is_object()) bad("logit_bias", "'logit_bias' must be an object of token id -> bias");
  if (m.size() > kMaxEntries)
    bad("logit_bias", "'logit_bias' holds more than " + std::to_string(kMaxEntries) + " entries");
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, value] : m.items()) {
    const std::string where = "logit_bias." + key;
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > INT32_MAX)
      bad(where, "'" + where + "': the key must be a token id (a non-negative integer)");
    if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100))
      bad(where, "'" + where + "' must be a number in [-100, 100]");
    out.emplace_back(int32_t(id), float(value.get<double>()));
  }
  return out;
}

// Its count and lengths are checked against the limits with the rest of the engine request.
std::vector<std::string> stop_param(const json& body) {
  if (!body.contains("stop") || body["stop"].is_null()) return {};
  const json& s = body["stop"];
  if (s.is_string()) return {s.get<std::string>()};
  if (!s.is_array()) bad("stop", "'stop' must be a string or an array of strings");
  std::vector<std::string> out;
  for (const auto& x : s) {
    if (!x.is_string()) bad("stop", "'stop' must hold strings only");
    out.push_back(x.get<std::string>());
  }
  return out;
}

int32_t priority_param(const json& body, const ServerConfig& cfg) {
  if (!body.contains("priority") || body["priority"].is_null()) return 0;
  const json& p = body["priority"];
  if (p.is_number_integer()) return int32_t(std::clamp<int64_t>(p.get<int64_t>(), -1000, 1000));
  if (p.is_string()) {
    auto it = cfg.priorities.find(p.get<std::string>());
    if (it == cfg.priorities.end())
      bad("priority", "'priority' names no configured class: '" + p.get<std::string>() + "'");
    return it->second;
  }
  bad("priority", "'priority' must be a class name or an integer");
}

// A part of the body as the runtime takes it (JSON text; the body was checked as UTF-8).
std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The constraint a request asks for: response_format json_object / json_schema, or the
// `grammar` extension (GBNF text); kind kNone for free text. Compiled here, so a bad one is
// a 400 naming its field before anything runs.
OutputConstraint constraint_param(const json& body, const RequestLimits& limits) {
  const json rf = body.value("response_format", json());
  const bool has_grammar = body.contains("grammar") && !body["grammar"].is_null();
  OutputConstraint c;
  c.source = "response_format";
  if (!rf.is_null()) {
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
      bad("response_format", "'response_format' must be an object with a 'type'");
    const std::string type = rf["type"];
    if (type == "text") {
      if (!has_grammar) return c;
    } else if (type == "json_object") {
      c.kind = ConstraintKind::kJsonObject;
    } else if (type == "json_schema") {
      const json spec = rf.value("json_schema", json());
      if (!spec.is_object() || !spec.contains("schema"))
        bad("response_format.json_schema", "'response_format.json_schema' must be an object with a 'schema'");
      c.kind = ConstraintKind::kJsonSchema;
      c.text = spec["schema"].dump(-1, ' ', false, json::error_handler_t::replace);
      c.source = "response_format.json_schema.schema";
    } else {
      bad("response_format.type", "'response_format.type' must be text, json_object or json_schema");
    }
  }
  if (has_grammar) {
    if (c.kind != ConstraintKind::kNone) bad("grammar", "'grammar' and a JSON response_format cannot be combined");
    if (!body["grammar"].is_string()) bad("grammar", "'grammar' must be a string (GBNF)");
    c.kind = ConstraintKind::kGbnf;
    c.text = body["grammar"].get<std::string>();
    c.source = "grammar";
  }
  if (Status st = compile_constraint(c, limits); !st.is_ok()) bad(st.field(), st.message());
  return c;
}

// A function tool of the request: {"type": "function", "function": {"name", "parameters"...}}.
void check_tools(const json& tools) {
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "]";
    const json& t = tools[i];
    if (!t.is_object() || !t.contains("type") || t["type"] != "function" || !t.contains("function") ||
        !t["function"].is_object())
      bad(where, "'" + where + "' must be {\"type\": \"function\", \"function\": {...}}");
    const json& fn = t["function"];
    if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
      bad(where + ".function.name", "'" + where + ".function.name' must be a non-empty string");
    if (fn.contains("parameters") && !fn["parameters"].is_object())
      bad(where + ".function.parameters", "'" + where + ".function.parameters' must be a JSON Schema object");
  }
}

// tool_choice: "none", "auto", "required" or {"type": "function", "function": {"name": ...}}.
void read_tool_choice(const json& body, bool have_tools, Conversation& out) {
  const json c = body.value("tool_choice", json());
  if (c.is_null()) {
    out.tool_choice = have_tools ? ToolChoice::kAuto : ToolChoice::kNone;
    return;
  }
  if (c.is_string()) {
    const std::string mode = c;
    if (mode != "none" && mode != "auto" && mode != "required")
      bad("tool_choice", "'tool_choice' must be none, auto, required or a named function");
    if (mode != "none" && !have_tools) bad("tool_choice", "'tool_choice' needs 'tools'");
    out.tool_choice = mode == "none" ? ToolChoice::kNone : mode == "auto" ? ToolChoice::kAuto : ToolChoice::kRequired;
    return;
  }
  if (c.is_object() && string_field(c, "type") == "function" && c.contains("function") && c["function"].is_object() &&
      c["function"].contains("name") && c["function"]["name"].is_string()) {
    if (!have_tools) bad("tool_choice", "'tool_choice' needs 'tools'");
    out.tool_choice = ToolChoice::kNamed;
    out.tool_name = c["function"]["name"].get<std::string>();
    return;
  }
  bad("tool_choice",
      "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
}

// An assistant message's tool_calls as templates expect them: arguments as objects.
json template_tool_calls(const json& calls, const std::string& where) {
  if (!calls.is_array()) bad(where, "'" + where + "' must be an array");
  json out = json::array();
  for (json c : calls) {
    if (c.contains("function") && c["function"].is_object() && c["function"].contains("arguments") &&
        c["function"]["arguments"].is_string()) {
      try {
        c["function"]["arguments"] = json::parse(c["function"]["arguments"].get<std::string>());
      } catch (const json::exception&) {
        // not JSON: the template gets the string
      }
    }
    if (c.contains("function") && c["function"].is_object()) {  // templates read tool_call.name too
      c["name"] = c["function"].contains("name") ? c["function"]["name"] : json("");
      c["arguments"] = c["function"].contains("arguments") ? c["function"]["arguments"] : json::object();
    }
    out.push_back(c);
  }
  return out;
}

json chat_messages(const json& body) {
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
    bad("messages", "'messages' must be a non-empty array");
  json messages = json::array();
  for (size_t i = 0; i < body["messages"].size(); ++i) {
    const json& m = body["messages"][i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      bad(where + ".role", "'" + where + ".role' must be a string");
    json copy = m;
    // OpenAI's newer name for the system role; chat templates know only "system" (and drop
    // roles they do not know).
    if (copy["role"] == "developer") copy["role"] = "system";
    copy["content"] = message_content(m.value("content", json()), where + ".content");
    if (m.contains("tool_calls") && !m["tool_calls"].is_null())
      copy["tool_calls"] = template_tool_calls(m["tool_calls"], where + ".tool_calls");
    messages.push_back(copy);
  }
  return messages;
}

// chat_template_kwargs as the template gets them, reasoning_effort (gpt-oss's low, medium or
// high) among them unless they set it themselves; "" when there are none.
std::string template_kwargs(const json& body) {
  const json& given = body.value("chat_template_kwargs", json());
  if (!given.is_null() && !given.is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
  json kwargs = given.is_object() ? given : json::object();
  if (body.contains("reasoning_effort") && !body["reasoning_effort"].is_null()) {
    const json& effort = body["reasoning_effort"];
    if (!effort.is_string() || (effort != "low" && effort != "medium" && effort != "high"))
      bad("reasoning_effort", "'reasoning_effort' must be low, medium or high");
    if (!kwargs.contains("reasoning_effort")) kwargs["reasoning_effort"] = effort;
  }
  return kwargs.empty() && given.is_null() ? "" : dump_json(kwargs);
}

std::optional<double> optional_number(const json& body, const char* name, double lo, double hi) {
  if (!body.contains(name) || body[name].is_null()) return std::nullopt;
  return number_param(body, name, lo, hi, 0);
}

std::optional<int64_t> optional_integer(const json& body, const char* name, int64_t lo, int64_t hi) {
  if (!body.contains(name) || body[name].is_null()) return std::nullopt;
  return integer_param(body, name, lo, hi, 0);
}

GenerationParams common_params(const json& j, const ServerConfig& config) {
  GenerationParams p;
  if (j.contains("model") && !j["model"].is_null()) {
    if (!j["model"].is_string()) bad("model", "'model' must be a string");
    p.model = j["model"];
  }
  p.n = integer_param(j, "n", 1, 128, 1);
  p.max_tokens =
      optional_integer(j, j.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens", 1, 1 << 30);
  p.temperature = optional_number(j, "temperature", 0, 2);
  p.top_p = optional_number(j, "top_p", 1e-9, 1);
  p.top_k = optional_integer(j, "top_k", 0, 1 << 20);
  p.min_p = number_param(j, "min_p", 0, 1, 0.0);
  p.presence_penalty = number_param(j, "presence_penalty", -2, 2, 0);
  p.frequency_penalty = number_param(j, "frequency_penalty", -2, 2, 0);
  p.repetition_penalty = optional_number(j, "repetition_penalty", 0.01, 10);
  if (j.contains("seed") && !j["seed"].is_null()) p.seed = uint64_t(integer_param(j, "seed", INT64_MIN, INT64_MAX, 0));
  p.stop = stop_param(j);
  p.logit_bias = logit_bias_param(j);
  p.ignore_eos = bool_param(j, "ignore_eos", false);
  p.speculative = bool_param(j, "speculative", true);
  p.skip_special_tokens = bool_param(j, "skip_special_tokens", true);
  p.constraint = constraint_param(j, config.runtime.limits);
  p.priority = priority_param(j, config);
  if (j.contains("user") && !j["user"].is_null() && !j["user"].is_string()) bad("user", "'user' must be a string");
  if (j.contains("user") && j["user"].is_string()) p.user = j["user"];
  p.cache = bool_param(j, "cache", true);
  p.response_format = j.contains("response_format") && !j["response_format"].is_null();
  p.timeout_seconds = optional_number(j, "timeout", 0.001, 86400);
  if (j.contains("cache_salt") && !j["cache_salt"].is_null()) {
    if (!j["cache_salt"].is_string()) bad("cache_salt", "'cache_salt' must be a string");
    p.cache_salt = j["cache_salt"].get<std::string>();
  }
  p.stream = bool_param(j, "stream", false);
  if (j.contains("stream_options") && j["stream_options"].is_object())
    p.include_usage = bool_param(j["stream_options"], "include_usage", false);
  return p;
}

}  // namespace

// mm_processor_kwargs: {min_pixels, max_pixels} for this request's images (vLLM's name).
void read_pixel_limits(const json& body, Conversation& c) {
  const json& kwargs = body.value("mm_processor_kwargs", json());
  if (kwargs.is_null()) return;
  if (!kwargs.is_object()) bad("mm_processor_kwargs", "'mm_processor_kwargs' must be an object");
  for (const auto& [key, value] : kwargs.items()) {
    const std::string where = "mm_processor_kwargs." + key;
    if (key != "min_pixels" && key != "max_pixels")
      bad(where, "'" + where + "' is not supported (min_pixels, max_pixels)");
    if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > (int64_t(1) << 32))
      bad(where, "'" + where + "' must be a positive integer");
    (key == "min_pixels" ? c.min_pixels : c.max_pixels) = value.get<int64_t>();
  }
  if (c.min_pixels > 0 && c.max_pixels > 0 && c.min_pixels > c.max_pixels)
    bad("mm_processor_kwargs.min_pixels", "'mm_processor_kwargs.min_pixels' must not exceed max_pixels");
}

void copy_chat_extensions(const json& from, json& chat) {
  for (const char* k : {"grammar", "reasoning_format", "chat_template_kwargs", "thinking_budget_tokens", "seed",
                        "priority", "cache_salt", "mm_processor_kwargs", "skip_special_tokens"})
    if (from.contains(k)) chat[k] = from[k];
}

ChatRequest parse_chat_request(const json& j, const ServerConfig& config) {
  ChatRequest r;
  r.messages = chat_messages(j);
  Conversation& c = r.conversation;
  c.messages_json = dump_json(r.messages);
  c.template_kwargs_json = template_kwargs(j);
  json tools = j.contains("tools") ? j["tools"] : json();
  if (!tools.is_null() && !tools.is_array()) bad("tools", "'tools' must be an array");
  if (tools.is_array()) check_tools(tools);
  r.tools_offered = tools.is_array() && !tools.empty();
  read_tool_choice(j, r.tools_offered, c);
  if (c.tool_choice != ToolChoice::kNone) c.tools_json = dump_json(tools);
  r.params = common_params(j, config);
  const bool forced = c.tool_choice == ToolChoice::kRequired || c.tool_choice == ToolChoice::kNamed;
  if (forced && r.params.constraint.kind != ConstraintKind::kNone)
    bad("tool_choice", "a forced tool call cannot be combined with response_format or grammar");
  if (c.tool_choice != ToolChoice::kNone) c.parallel_tool_calls = bool_param(j, "parallel_tool_calls", true);
  read_pixel_limits(j, c);
  c.reasoning_format = config.reasoning_format;
  if (j.contains("reasoning_format") && !j["reasoning_format"].is_null()) {
    auto format = j["reasoning_format"].is_string()
                      ? reasoning_format_from_name(j["reasoning_format"].get<std::string>())
                      : Result<ReasoningFormat>(invalid_argument(""));
    if (!format) bad("reasoning_format", "'reasoning_format' must be auto, none or deepseek");
    c.reasoning_format = *format;
  }
  if (j.contains("thinking_budget_tokens") && !j["thinking_budget_tokens"].is_null())
    c.thinking_budget_tokens = int32_t(integer_param(j, "thinking_budget_tokens", 0, INT32_MAX, -1));
  r.params.logprobs = bool_param(j, "logprobs", false);
  if (r.params.logprobs)
    r.params.top_logprobs = int32_t(integer_param(j, "top_logprobs", 0, INT32_MAX, 0));
  else if (j.contains("top_logprobs") && !j["top_logprobs"].is_null())
    bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  return r;
}

CompletionRequest parse_completion_request(const json& j, const ServerConfig& config) {
  CompletionRequest r;
  if (!j.contains("prompt")) bad("prompt", "'prompt' is required");
  const json& p = j["prompt"];
  if (p.is_string())
    r.prompt = check_utf8(p.get<std::string>(), "prompt");
  else if (p.is_array() && p.size() == 1 && p[0].is_string())
    r.prompt = check_utf8(p[0].get<std::string>(), "prompt");
  else
    bad("prompt", "'prompt' must be a string");
  r.params = common_params(j, config);
  if (j.contains("logprobs") && !j["logprobs"].is_null()) {  // the legacy form: the number of alternatives
    r.params.top_logprobs = int32_t(integer_param(j, "logprobs", 0, INT32_MAX, 0));
    r.params.logprobs = true;
  }
  return r;
}

GenerationCall parse_generation_call(GenerationKind kind, const json& body, const ServerConfig& config) {
  GenerationCall call;
  call.kind = kind;
  if (kind == GenerationKind::kChat)
    call.chat = parse_chat_request(body, config);
  else
    call.completion = parse_completion_request(body, config);
  return call;
}

Request runtime_request(const GenerationCall& call, const SamplingDefaults& d) {
  const GenerationParams& p = call.params();
  Request r;
  if (call.is_chat())
    r.chat = call.chat.conversation;
  else
    r.text = call.completion.prompt;
  r.max_tokens = int32_t(std::min<int64_t>(p.max_tokens.value_or(-1), INT32_MAX));
  r.sampling.temperature = float(p.temperature.value_or(d.greedy ? 0.0 : d.temperature.value_or(1.0)));
  r.sampling.top_p = float(p.top_p.value_or(d.top_p.value_or(1.0)));
  r.sampling.top_k = int32_t(p.top_k.value_or(d.top_k.value_or(0)));
  r.sampling.min_p = float(p.min_p);
  r.sampling.presence_penalty = float(p.presence_penalty);
  r.sampling.frequency_penalty = float(p.frequency_penalty);
  r.sampling.repetition_penalty = float(p.repetition_penalty.value_or(d.repetition_penalty.value_or(1.0)));
  r.sampling.seed = p.seed;
  r.sampling.logit_bias = p.logit_bias;
  r.stop = p.stop;
  r.ignore_eos = p.ignore_eos;
  r.speculative = p.speculative;
  r.skip_special_tokens = p.skip_special_tokens;
  r.constraint = p.constraint;
  r.priority = p.priority;
  if (p.timeout_seconds) r.timeout = std::chrono::milliseconds(int64_t(1000 * *p.timeout_seconds));
  r.top_logprobs = p.logprobs ? p.top_logprobs : -1;
  return r;
}

}  // namespace autoglm
