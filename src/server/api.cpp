#include "server/api.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/last_resort.h"
#include "core/random_id.h"
#include "core/read_file.h"
#include "core/thread_pool.h"
#include "sample/grammar.h"
#include "sample/json_schema.h"
#include "tasks/task_pipeline.h"
#include "tasks/tool_calls.h"
#include "tokenizer/utf8.h"

namespace autoglm {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// A bad parameter: 400 with the parameter's name.
struct ParamError {
  std::string param, message;
};

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ParamError{param, message};
}

double number_param(const json& body, const char* name, double lo, double hi, double dflt) {
  if (!body.contains(name) || body[name].is_null()) return dflt;
  const json& v = body[name];
  if (!v.is_number()) bad(name, std::string("'") + name + "' must be a number");
  const double d = v.get<double>();
  if (!(d >= lo && d <= hi))
    bad(name, std::string("'") + name + "' must be between " + json(lo).dump() + " and " + json(hi).dump());
  return d;
}

int64_t integer_param(const json& body, const char* name, int64_t lo, int64_t hi, int64_t dflt) {
  if (!body.contains(name) || body[name].is_null()) return dflt;
  const json& v = body[name];
  if (!v.is_number_integer()) bad(name, std::string("'") + name + "' must be an integer");
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi)
    bad(name, std::string("'") + name + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return i;
}

bool bool_param(const json& body, const char* name, bool dflt) {
  if (!body.contains(name) || body[name].is_null()) return dflt;
  if (!body[name].is_boolean()) bad(name, std::string("'") + name + "' must be a boolean");
  return body[name].get<bool>();
}

std::string check_utf8(const std::string& s, const std::string& param) {
  if (utf8::sanitize(s) != s) bad(param, "'" + param + "' is not valid UTF-8");
  return s;
}

// Message content: a string, or an array of {"type": "text", "text": ...} parts.
std::string content_text(const json& content, const std::string& param) {
  if (content.is_null()) return "";
  if (content.is_string()) return check_utf8(content.get<std::string>(), param);
  if (!content.is_array()) bad(param, "'" + param + "' must be a string or an array of text parts");
  std::string text;
  for (const auto& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      bad(param, "'" + param + "' parts must be {\"type\": \"text\", \"text\": \"...\"}");
    text += check_utf8(part["text"].get<std::string>(), param);
  }
  return text;
}

std::vector<std::string> stop_param(const json& body) {
  if (!body.contains("stop") || body["stop"].is_null()) return {};
  const json& s = body["stop"];
  if (s.is_string()) return {s.get<std::string>()};
  if (!s.is_array() || s.size() > 16) bad("stop", "'stop' must be a string or an array of at most 16 strings");
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

// The grammar a request asks for: response_format json_object / json_schema, or the
// `grammar` extension (GBNF text); null for free text.
std::shared_ptr<const Grammar> grammar_param(const json& body) {
  const json rf = body.value("response_format", json());
  const bool has_grammar = body.contains("grammar") && !body["grammar"].is_null();
  std::string gbnf;
  std::string param = "response_format";
  if (!rf.is_null()) {
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
      bad("response_format", "'response_format' must be an object with a 'type'");
    const std::string type = rf["type"];
    if (type == "text") {
      if (!has_grammar) return nullptr;
    } else if (type == "json_object") {
      gbnf = json_object_gbnf();
    } else if (type == "json_schema") {
      const json spec = rf.value("json_schema", json());
      if (!spec.is_object() || !spec.contains("schema"))
        bad("response_format.json_schema", "'response_format.json_schema' must be an object with a 'schema'");
      auto converted = json_schema_to_gbnf(spec["schema"]);
      if (!converted) bad("response_format.json_schema.schema", converted.status().message());
      gbnf = *converted;
    } else {
      bad("response_format.type", "'response_format.type' must be text, json_object or json_schema");
    }
  }
  if (has_grammar) {
    if (!gbnf.empty()) bad("grammar", "'grammar' and a JSON response_format cannot be combined");
    if (!body["grammar"].is_string()) bad("grammar", "'grammar' must be a string (GBNF)");
    gbnf = body["grammar"].get<std::string>();
    param = "grammar";
  }
  if (gbnf.empty()) return nullptr;
  auto grammar = Grammar::parse(gbnf);
  if (!grammar) bad(param, grammar.status().message());
  return *grammar;
}

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

std::string sse(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

// Tracks one generation for the response and the metrics.
struct GenerationState {
  bool chat = true;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  std::string id, model;
  int64_t created = 0;
  std::string text;
  json logprob_items = json::array();
  Clock::time_point arrival = Clock::now();
  std::optional<Clock::time_point> last_token;
  bool sent_role = false;
  std::shared_ptr<ToolCallParser> tools;  // chat with tools: the model's calls parsed out of its text
  bool parallel_tool_calls = true;
  json tool_calls = json::array();
};

json tool_call_json(const ToolCall& c) {
  return {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
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

// tool_choice: "none", "auto", "required" or {"type": "function", "function": {"name": ...}};
// returns the mode and, for a named function, its name.
std::pair<std::string, std::string> tool_choice_param(const json& body, bool have_tools) {
  const json c = body.value("tool_choice", json());
  if (c.is_null()) return {have_tools ? "auto" : "none", ""};
  if (c.is_string()) {
    const std::string mode = c;
    if (mode != "none" && mode != "auto" && mode != "required")
      bad("tool_choice", "'tool_choice' must be none, auto, required or a named function");
    if (mode != "none" && !have_tools) bad("tool_choice", "'tool_choice' needs 'tools'");
    return {mode, ""};
  }
  if (c.is_object() && c.value("type", "") == "function" && c.contains("function") && c["function"].is_object() &&
      c["function"].contains("name") && c["function"]["name"].is_string()) {
    if (!have_tools) bad("tool_choice", "'tool_choice' needs 'tools'");
    return {"named", c["function"]["name"].get<std::string>()};
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

json choice_delta(const GenerationState& g, const std::string& text, const json& logprobs, const json& finish) {
  json c = {{"index", 0}};
  if (g.chat) {
    json delta = json::object();
    if (!g.sent_role) delta["role"] = "assistant";
    if (!text.empty() || finish.is_null()) delta["content"] = text;
    c["delta"] = delta;
  } else {
    c["text"] = text;
  }
  c["logprobs"] = logprobs;
  c["finish_reason"] = finish;
  return c;
}

json chunk_envelope(const GenerationState& g) {
  return {{"id", g.id},
          {"object", g.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", g.created},
          {"model", g.model}};
}

// Chat: {"content": [entries]}. Completions use the legacy shape: parallel lists of
// tokens, their logprobs, {token: logprob} alternatives and text offsets.
// Records the calls the parser completed (only the first without parallel_tool_calls); when
// streaming, returns their chunks: one opens each call (id, name), the next carries its arguments.
std::string take_tool_calls(GenerationState& g, const std::vector<ToolCall>& calls) {
  std::string out;
  for (const ToolCall& c : calls) {
    const int index = int(g.tool_calls.size());
    if (!g.parallel_tool_calls && index > 0) break;
    g.tool_calls.push_back(tool_call_json(c));
    if (!g.stream) continue;
    json open = chunk_envelope(g), args = chunk_envelope(g);
    json delta = {{"tool_calls", json::array({{{"index", index},
                                               {"id", c.id},
                                               {"type", "function"},
                                               {"function", {{"name", c.name}, {"arguments", ""}}}}})}};
    if (!g.sent_role) delta["role"] = "assistant";
    g.sent_role = true;
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

json logprobs_json(const GenerationState& g, const json& items, size_t text_offset = 0) {
  if (!g.logprobs) return nullptr;
  if (g.chat) return {{"content", items}};
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

}  // namespace

int http_status_of(FinishReason reason) {
  switch (reason) {
    case FinishReason::kError: return 500;
    case FinishReason::kTimeout: return 408;
    default: return 200;
  }
}

Reply error_reply(int status, const std::string& message, const std::string& param, const std::string& type) {
  Reply r;
  r.status = status;
  json err = {
      {"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)}, {"code", nullptr}};
  if (status == 401) err["code"] = "invalid_api_key";
  if (status == 404) err["code"] = "not_found";
  if (status == 429) err["code"] = "rate_limit_exceeded";
  // Messages may quote the client's bytes: never let them break the JSON.
  r.body = json{{"error", err}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

ApiService::ApiService(ServerConfig config) : config_(std::move(config)) {}
ApiService::~ApiService() {
  std::unique_lock<std::mutex> lock(tasks_mutex_);
  tasks_done_.wait(lock, [&] { return tasks_running_ == 0; });
}

namespace {

// The special-token variables every render gets.
json special_token_variables(const Tokenizer& tok) {
  const Vocab& v = tok.vocab();
  return {{"bos_token", v.bos >= 0 ? v.pieces[size_t(v.bos)] : ""},
          {"eos_token", v.eos >= 0 ? v.pieces[size_t(v.eos)] : ""}};
}

// A template that cannot render one user message (or is hostile) is refused at start-up, not
// discovered by the first request.
Status dry_render(const ChatTemplate& chat_template, const Tokenizer& tok, const std::string& origin) {
  const json messages = json::array({{{"role", "user"}, {"content", "Hello"}}});
  auto rendered = chat_template.render(messages, json(), true, special_token_variables(tok));
  if (!rendered)
    return invalid_argument(origin + ": fails a dry render of one user message: " + rendered.status().message());
  return Status::ok();
}

}  // namespace

void ApiService::begin_stop() {
  stopping_ = true;
}

Status ApiService::load() {
  AUTOGLM_RETURN_IF_ERROR(check_access_rules(config_));
  auto s = std::make_unique<LoadedService>();
  ModelLoadOptions options;
  options.arch_override = config_.architecture;
  if (!config_.quantize.empty()) {
    const auto type = dtype_from_name(config_.quantize);
    if (!type)
      return invalid_argument("quantize: '" + config_.quantize + "' is not a weight type (q8_0, q4_0, q4_k, ...)");
    options.quantize = *type;
  }
  AUTOGLM_ASSIGN_OR_RETURN(s->model, Model::load(config_.model, options));
  AUTOGLM_ASSIGN_OR_RETURN(s->tokenizer, s->model->load_tokenizer());
  const std::string& own = s->tokenizer->vocab().chat_template;
  if (!config_.chat_template.empty()) {
    auto builtin = ChatTemplate::builtin(config_.chat_template);
    if (builtin) {
      s->chat_template = std::move(builtin).value();
    } else {
      auto text = read_file(config_.chat_template);
      if (!text)
        return invalid_argument("chat_template: '" + config_.chat_template +
                                "' is neither a built-in name nor a readable file");
      AUTOGLM_ASSIGN_OR_RETURN(s->chat_template, ChatTemplate::parse(*text));
    }
  } else if (!own.empty()) {
    auto parsed = ChatTemplate::parse(own);
    if (!parsed)
      return Status(parsed.status().code(), config_.model + ": tokenizer.chat_template: " + parsed.status().message());
    s->chat_template = std::move(parsed).value();
  } else {
    s->chat_template = std::move(ChatTemplate::builtin("chatml")).value();
  }
  s->chat_template->set_cancel_flag(&stopping_);
  AUTOGLM_RETURN_IF_ERROR(dry_render(*s->chat_template, *s->tokenizer,
                                     !config_.chat_template.empty() ? "chat_template '" + config_.chat_template + "'"
                                     : !own.empty()                 ? config_.model + ": tokenizer.chat_template"
                                                                    : "the built-in chatml template"));
  const ModelSpec& spec = s->model->spec();
  EngineConfig ec;
  ec.n_ctx = std::min<int64_t>(config_.context_window, spec.n_ctx_train > 0
                                                           ? std::max<int64_t>(spec.n_ctx_train, config_.context_window)
                                                           : config_.context_window);
  ec.block_size = config_.kv_block_size;
  auto kv_type = kv_type_from_name(config_.kv_dtype);
  if (!kv_type) return Status(kv_type.status().code(), "kv_cache.dtype: " + kv_type.status().message());
  auto format = kv_format(spec, *kv_type);
  if (!format) return Status(format.status().code(), "kv_cache.dtype: " + format.status().message());
  ec.kv_type = *kv_type;
  const double bytes_per_block =
      double(spec.n_layer * config_.kv_block_size * (format->k_row_bytes + format->v_row_bytes));
  double budget = config_.kv_cache_mib * 1048576.0;
  if (config_.kv_cache_fraction > 0) {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    long long kb = 0;
    std::string unit;
    while (meminfo >> key >> kb >> unit)
      if (key == "MemAvailable:") budget = config_.kv_cache_fraction * double(kb) * 1024.0;
  }
  ec.kv_blocks = std::max<int64_t>(2, int64_t(budget / bytes_per_block));
  ec.max_batch_tokens = config_.max_batch_tokens;
  ec.max_running = config_.max_running;
  ec.max_queued = config_.max_queued;
  ec.prefix_cache = config_.prefix_cache;
  ec.profile = config_.profile;
  s->pool = std::make_unique<ThreadPool>(config_.threads > 0 ? config_.threads : physical_core_count());
  s->engine = std::make_unique<Engine>(*s->model, *s->tokenizer, *s->pool, ec);
  AUTOGLM_ASSIGN_OR_RETURN(s->tools, ToolRegistry::build(config_.tools, config_.http_allowlist));
  s->tasks = std::make_shared<TaskPipeline>(*s->engine, *s->tokenizer, *s->chat_template, s->tools, config_.task);
  s->tool_call_family = tool_call_family(s->chat_template->source());
  std::string path = config_.model;
  while (path.size() > 1 && path.back() == '/') path.pop_back();  // a folder given as "dir/"
  const size_t slash = path.find_last_of('/');
  s->model_name = path.substr(slash == std::string::npos ? 0 : slash + 1);
  service_ = std::move(s);
  ready_ = true;
  return Status::ok();
}

Reply ApiService::handle(const HttpRequest& request) {
  Reply r;
  try {
    r = route(request);
  } catch (const ParamError& e) {
    r = error_reply(400, e.message, e.param);
  } catch (const std::exception& e) {
    r = error_reply(500, std::string("internal error: ") + e.what(), "", "server_error");
  } catch (...) {
    r = error_reply(500, "internal error", "", "server_error");
  }
  return r;
}

Reply ApiService::route(const HttpRequest& req) {
  std::string path = req.target.substr(0, req.target.find('?'));
  if (path == "/health") {
    if (!ready()) return error_reply(503, "the model is loading", "", "service_unavailable");
    Reply r;
    r.body = R"({"status":"ok"})";
    return r;
  }
  static const std::vector<std::pair<std::string, std::string>> routes = {
      {"POST", "/v1/chat/completions"}, {"POST", "/v1/completions"}, {"GET", "/v1/models"}, {"POST", "/tokenize"},
      {"POST", "/detokenize"},          {"POST", "/v1/tasks"},       {"GET", "/metrics"}};
  bool known = false, method_ok = false;
  for (const auto& [m, p] : routes)
    if (p == path) {
      known = true;
      method_ok = method_ok || m == req.method;
    }
  if (!known) return error_reply(404, "no route " + req.method + " " + path);
  if (!method_ok) return error_reply(405, "method " + req.method + " is not allowed on " + path);
  const std::string bearer = "Bearer ";
  const bool has = req.authorization.compare(0, bearer.size(), bearer) == 0;
  const std::string key = has ? req.authorization.substr(bearer.size()) : "";
  const bool open_route = path == "/metrics" && !config_.metrics_require_key;
  if (!config_.api_keys.empty() && !open_route) {
    if (std::none_of(config_.api_keys.begin(), config_.api_keys.end(),
                     [&](const std::string& k) { return constant_time_equal(k, key); }))
      return error_reply(401, has ? "invalid API key" : "missing API key (Authorization: Bearer ...)", "",
                         "authentication_error");
  }
  if (!ready()) return error_reply(503, "the model is loading", "", "service_unavailable");
  if (path == "/metrics") return metrics_text();
  if (path == "/v1/models") return models();
  if (path == "/tokenize") return tokenize(req.body);
  if (path == "/detokenize") return detokenize(req.body);
  if (path == "/v1/tasks") return run_task(req.body, key);
  return generate(req.body, path == "/v1/chat/completions");
}

Reply ApiService::models() {
  Reply r;
  r.body = json{{"object", "list"},
                {"data", json::array({{{"id", service_->model_name},
                                       {"object", "model"},
                                       {"created", int64_t(std::time(nullptr))},
                                       {"owned_by", "open-autoglm"}}})}}
               .dump();
  return r;
}

Reply ApiService::metrics_text() {
  Reply r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = metrics_.render(service_->engine->stats(), &service_->engine->op_profile(), &service_->tools->stats());
  return r;
}

namespace {

json parse_body(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    bad("", std::string("the body is not valid JSON (or not UTF-8): ") + e.what());
  }
  if (!j.is_object()) bad("", "the body must be a JSON object");
  return j;
}

}  // namespace

// POST /v1/tasks {"input", "session"?, "max_steps"?, "seed"?, "force_action"?}: runs on its own
// thread (a task waits on several generations and tools) and replies when it is done.
Reply ApiService::run_task(const std::string& body, const std::string& api_key) {
  const json j = parse_body(body);
  if (!j.contains("input") || !j["input"].is_string() || j["input"].get<std::string>().empty())
    bad("input", "'input' must be a non-empty string");
  auto request = std::make_shared<TaskRequest>();
  request->input = check_utf8(j["input"].get<std::string>(), "input");
  request->owner = config_.api_keys.empty() ? "" : api_key;
  if (j.contains("session") && !j["session"].is_null()) {
    if (!j["session"].is_string()) bad("session", "'session' must be a string");
    request->session = j["session"];
    if (!service_->tasks->has_session(request->session, request->owner))
      return error_reply(404, "session '" + request->session + "' does not exist or has expired", "session");
  }
  request->max_steps = int(integer_param(j, "max_steps", 1, 32, 0));
  if (j.contains("seed") && !j["seed"].is_null()) request->seed = uint64_t(integer_param(j, "seed", 0, INT64_MAX, 0));
  if (j.contains("force_action") && !j["force_action"].is_null()) {
    const std::string f = j["force_action"].is_string() ? j["force_action"].get<std::string>() : "";
    if (f != "call" && f != "clarify" && f != "finish")
      bad("force_action", "'force_action' must be call, clarify or finish");
    request->force_action = f;
  }
  request->who =
      api_key.empty() ? "anonymous" : "key ..." + api_key.substr(api_key.size() - std::min<size_t>(4, api_key.size()));
  if (auto it = config_.tool_access.find(api_key); it != config_.tool_access.end())
    request->allowed_tools = &it->second;  // config_ outlives the task: the service waits for tasks
  auto handle = std::make_shared<StreamHandle>();
  auto tasks = service_->tasks;
  ServerMetrics* metrics = &metrics_;
  {
    std::lock_guard<std::mutex> lock(tasks_mutex_);
    if (tasks_running_ >= config_.max_queued) {  // each task holds a thread: bound them like the queue
      Reply busy = error_reply(429, "too many tasks running", "", "rate_limit_error");
      busy.headers.emplace_back("Retry-After", "1");
      return busy;
    }
    ++tasks_running_;
  }
  std::thread([this, tasks, request, handle, metrics] {
    StreamEvent ev;
    ev.finished = true;
    const auto fail = [&](const std::string& message) {
      metrics->count_task("error");
      ev.finish_reason = FinishReason::kError;
      ev.error = message;
    };
    run_guarded(
        "task",
        [&] {
          auto result = tasks->run(*request);
          if (!result) return fail(result.status().message());
          metrics->count_task((*result)["status"]);
          ev.text = result->dump(-1, ' ', false, json::error_handler_t::replace);
        },
        [&](const std::string& what) { fail("internal error: " + what); });
    handle->push(std::move(ev));
    std::lock_guard<std::mutex> lock(tasks_mutex_);
    if (--tasks_running_ == 0) tasks_done_.notify_all();
  }).detach();
  Reply r;
  r.stream = handle;
  r.consume = [](const StreamEvent& ev, bool& complete) -> std::string {
    complete = true;
    if (ev.finish_reason != FinishReason::kError) return ev.text;
    return json{{"error", {{"message", ev.error}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}}
        .dump(-1, ' ', false, json::error_handler_t::replace);
  };
  return r;
}

Reply ApiService::tokenize(const std::string& body) {
  const json j = parse_body(body);
  if (!j.contains("content") || !j["content"].is_string()) bad("content", "'content' must be a string");
  const bool add_special = bool_param(j, "add_special", true);
  const bool with_pieces = bool_param(j, "with_pieces", false);
  const auto ids = service_->tokenizer->encode(check_utf8(j["content"], "content"), add_special, true);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (with_pieces)
      tokens.push_back({{"id", id}, {"piece", token_text(*service_->tokenizer, id)}});
    else
      tokens.push_back(id);
  }
  Reply r;
  r.body = json{{"tokens", tokens}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

Reply ApiService::detokenize(const std::string& body) {
  const json j = parse_body(body);
  if (!j.contains("tokens") || !j["tokens"].is_array()) bad("tokens", "'tokens' must be an array of token ids");
  std::vector<int32_t> ids;
  for (const auto& t : j["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= service_->tokenizer->n_vocab())
      bad("tokens", "'tokens' holds an id outside the vocabulary");
    ids.push_back(int32_t(t.get<int64_t>()));
  }
  Reply r;
  r.body = json{{"content", service_->tokenizer->decode(ids)}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

Reply ApiService::generate(const std::string& body, bool chat) {
  const json j = parse_body(body);
  const Tokenizer& tok = *service_->tokenizer;
  if (j.contains("model") && !j["model"].is_null()) {
    if (!j["model"].is_string()) bad("model", "'model' must be a string");
    const std::string m = j["model"];
    if (!m.empty() && m != service_->model_name)
      return error_reply(404, "the model '" + m + "' does not exist; this server serves '" + service_->model_name + "'",
                         "model");
  }
  if (integer_param(j, "n", 1, 128, 1) != 1) bad("n", "'n' must be 1: one choice per request");

  // The prompt: a chat rendered by the template, or plain text.
  std::string prompt_text;
  json tools;
  std::string tool_mode = "none", tool_name;
  if (chat) {
    if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty())
      bad("messages", "'messages' must be a non-empty array");
    json messages = json::array();
    for (size_t i = 0; i < j["messages"].size(); ++i) {
      const json& m = j["messages"][i];
      const std::string where = "messages[" + std::to_string(i) + "]";
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
        bad(where + ".role", "'" + where + ".role' must be a string");
      json copy = m;
      copy["content"] = content_text(m.value("content", json()), where + ".content");
      if (m.contains("tool_calls") && !m["tool_calls"].is_null())
        copy["tool_calls"] = template_tool_calls(m["tool_calls"], where + ".tool_calls");
      messages.push_back(copy);
    }
    json vars = special_token_variables(tok);
    if (j.contains("chat_template_kwargs") && j["chat_template_kwargs"].is_object())
      for (const auto& [k, v] : j["chat_template_kwargs"].items()) vars[k] = v;
    tools = j.contains("tools") ? j["tools"] : json();
    if (!tools.is_null() && !tools.is_array()) bad("tools", "'tools' must be an array");
    if (tools.is_array()) check_tools(tools);
    std::tie(tool_mode, tool_name) = tool_choice_param(j, tools.is_array() && !tools.empty());
    if (tool_mode == "none") tools = json();
    auto rendered = service_->chat_template->render(messages, tools, true, vars);
    if (!rendered) bad("messages", rendered.status().message());
    prompt_text = *rendered;
  } else {
    if (!j.contains("prompt")) bad("prompt", "'prompt' is required");
    const json& p = j["prompt"];
    if (p.is_string())
      prompt_text = check_utf8(p.get<std::string>(), "prompt");
    else if (p.is_array() && p.size() == 1 && p[0].is_string())
      prompt_text = check_utf8(p[0].get<std::string>(), "prompt");
    else
      bad("prompt", "'prompt' must be a string");
  }
  const std::string& bos_text = tok.vocab().bos >= 0 ? tok.vocab().pieces[size_t(tok.vocab().bos)] : "";
  const bool has_bos_text = !bos_text.empty() && prompt_text.compare(0, bos_text.size(), bos_text) == 0;
  GenerationRequest g;
  g.prompt = tok.encode(prompt_text, /*add_special=*/!has_bos_text, /*parse_special=*/chat);
  const int64_t n_ctx = service_->engine->config().n_ctx;
  if (int64_t(g.prompt.size()) + 1 > n_ctx)
    bad(chat ? "messages" : "prompt", "the prompt has " + std::to_string(g.prompt.size()) +
                                          " tokens; the context window is " + std::to_string(n_ctx) + " tokens");
  const int64_t room = n_ctx - int64_t(g.prompt.size());
  const char* max_key = j.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  g.max_tokens = int32_t(std::min<int64_t>(integer_param(j, max_key, 1, 1 << 30, room), room));
  // Unset parameters take the model's generation_config.json values (Hugging Face folders).
  const GenerationDefaults& d = service_->model->generation_defaults();
  g.sampling.temperature = float(number_param(j, "temperature", 0, 2, d.greedy ? 0.0 : d.temperature.value_or(1.0)));
  g.sampling.top_p = float(number_param(j, "top_p", 1e-9, 1, d.top_p.value_or(1.0)));
  g.sampling.top_k = int32_t(integer_param(j, "top_k", 0, 1 << 20, d.top_k.value_or(0)));
  g.sampling.min_p = float(number_param(j, "min_p", 0, 1, 0.0));
  g.sampling.presence_penalty = float(number_param(j, "presence_penalty", -2, 2, 0));
  g.sampling.frequency_penalty = float(number_param(j, "frequency_penalty", -2, 2, 0));
  g.sampling.repetition_penalty =
      float(number_param(j, "repetition_penalty", 0.01, 10, d.repetition_penalty.value_or(1.0)));
  if (j.contains("seed") && !j["seed"].is_null())
    g.sampling.seed = uint64_t(integer_param(j, "seed", INT64_MIN, INT64_MAX, 0));
  g.stop = stop_param(j);
  g.ignore_eos = bool_param(j, "ignore_eos", false);
  g.grammar = grammar_param(j);
  const ToolCallFamily family = service_->tool_call_family;
  if (tool_mode == "required" || tool_mode == "named") {  // the call itself is constrained
    if (g.grammar) bad("tool_choice", "a forced tool call cannot be combined with response_format or grammar");
    auto text = tool_call_grammar(family, tools, tool_name);
    if (!text) bad(tool_mode == "named" ? "tool_choice" : "tools", text.status().message());
    auto grammar = Grammar::parse(*text);
    if (!grammar) bad("tools", grammar.status().message());
    g.grammar = *grammar;
  }
  g.priority = priority_param(j, config_);
  if (j.contains("user") && !j["user"].is_null() && !j["user"].is_string()) bad("user", "'user' must be a string");
  if (j.contains("timeout") && !j["timeout"].is_null())
    g.deadline = Clock::now() + std::chrono::milliseconds(int64_t(1000 * number_param(j, "timeout", 0.001, 86400, 0)));

  auto state = std::make_shared<GenerationState>();
  state->chat = chat;
  if (tool_mode != "none") {
    std::vector<std::string> names;
    for (const json& t : tools) names.push_back(t["function"]["name"]);
    state->tools = std::make_shared<ToolCallParser>(family, names, "call_" + std::to_string(next_id_.load()) + "_");
    state->parallel_tool_calls = bool_param(j, "parallel_tool_calls", true);
  }
  state->stream = bool_param(j, "stream", false);
  if (j.contains("stream_options") && j["stream_options"].is_object())
    state->include_usage = bool_param(j["stream_options"], "include_usage", false);
  if (chat) {
    state->logprobs = bool_param(j, "logprobs", false);
    if (state->logprobs)
      g.top_logprobs = int32_t(integer_param(j, "top_logprobs", 0, 20, 0));
    else if (j.contains("top_logprobs") && !j["top_logprobs"].is_null())
      bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  } else if (j.contains("logprobs") && !j["logprobs"].is_null()) {
    g.top_logprobs = int32_t(integer_param(j, "logprobs", 0, 20, 0));
    state->logprobs = true;
  }
  state->id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
  state->model = service_->model_name;
  state->created = int64_t(std::time(nullptr));

  auto handle = service_->engine->submit(std::move(g));
  if (!handle) {
    if (handle.status().code() == StatusCode::kResourceExhausted) {
      Reply r = error_reply(429, handle.status().message(), "", "rate_limit_error");
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
    bad(chat ? "messages" : "prompt", handle.status().message());
  }
  Reply r;
  r.stream = *handle;
  r.streaming = state->stream;
  if (r.streaming) r.content_type = "text/event-stream";
  const Tokenizer* tokp = &tok;
  ServerMetrics* metrics = &metrics_;
  r.consume = [state, tokp, metrics](const StreamEvent& ev, bool& complete) -> std::string {
    const auto now = Clock::now();
    if (!ev.tokens.empty()) {
      if (!state->last_token)
        metrics->time_to_first_token.observe(std::chrono::duration<double>(now - state->arrival).count());
      else
        metrics->inter_token_latency.observe(std::chrono::duration<double>(now - *state->last_token).count());
      state->last_token = now;
    }
    json items = json::array();
    for (const auto& lp : ev.logprobs) items.push_back(logprob_entry(*tokp, lp));
    // With tools, the text goes through the family's parser: content, and calls once complete.
    std::string content = ev.text;
    std::vector<ToolCall> calls;
    if (state->tools) {
      auto parsed = state->tools->push(ev.text);
      if (ev.finished) {
        auto rest = state->tools->finish();
        parsed.content += rest.content;
        parsed.calls.insert(parsed.calls.end(), rest.calls.begin(), rest.calls.end());
      }
      content = parsed.content;
      calls = parsed.calls;
    }
    std::string out;
    if (!ev.finished) {
      state->text += content;
      for (auto& it : items) state->logprob_items.push_back(it);
      if (state->stream && (!content.empty() || !items.empty())) {
        json chunk = chunk_envelope(*state);
        chunk["choices"] = json::array({choice_delta(
            *state, content, logprobs_json(*state, items, state->text.size() - content.size()), nullptr)});
        state->sent_role = true;
        out = sse(chunk);
      }
      return out + take_tool_calls(*state, calls);
    }
    // The last event: metrics, then the final chunk(s) or the whole body.
    complete = true;
    state->text += content;
    metrics->e2e_latency.observe(std::chrono::duration<double>(now - state->arrival).count());
    metrics->queue_time.observe(ev.queue_seconds);
    if (ev.completion_tokens > 0) metrics->prefill_time.observe(ev.prefill_seconds);
    out = take_tool_calls(*state, calls);
    const std::string finish = finish_reason_name(!state->tool_calls.empty() && ev.finish_reason == FinishReason::kStop
                                                      ? FinishReason::kToolCalls
                                                      : ev.finish_reason);
    if (state->stream) {
      json chunk = chunk_envelope(*state);
      chunk["choices"] = json::array({choice_delta(*state, content, logprobs_json(*state, json::array()), finish)});
      out += sse(chunk);
      if (state->include_usage) {
        json usage = chunk_envelope(*state);
        usage["choices"] = json::array();
        usage["usage"] = usage_of(ev);
        out += sse(usage);
      }
      return out + "data: [DONE]\n\n";
    }
    json choice = {{"index", 0}};
    if (state->chat) {
      choice["message"] = {{"role", "assistant"}, {"content", state->text}};
      if (!state->tool_calls.empty()) {
        if (state->text.empty()) choice["message"]["content"] = nullptr;
        choice["message"]["tool_calls"] = state->tool_calls;
      }
    } else
      choice["text"] = state->text;
    choice["logprobs"] = logprobs_json(*state, state->logprob_items);
    choice["finish_reason"] = finish;
    json full = {{"id", state->id},
                 {"object", state->chat ? "chat.completion" : "text_completion"},
                 {"created", state->created},
                 {"model", state->model},
                 {"choices", json::array({choice})},
                 {"usage", usage_of(ev)}};
    if (!ev.error.empty()) full["error"] = ev.error;
    return full.dump(-1, ' ', false, json::error_handler_t::replace);
  };
  return r;
}

}  // namespace autoglm
