#include "server/api.h"

#include "server/embeddings_route.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "core/last_resort.h"
#include "core/random_id.h"
#include "core/read_file.h"
#include "core/thread_pool.h"
#include "engine/request_limits.h"
#include "server/cascade_stream.h"
#include "server/openai_request.h"
#include "server/routing_config.h"
#include "tasks/subprocess.h"
#include "tasks/task_pipeline.h"

namespace autoglm {

using Clock = std::chrono::steady_clock;

namespace {

// The text of a message's content: a string, or the text parts of an array.
std::string content_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (content.is_array())
    for (const json& part : content)
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string())
        text += part["text"].get<std::string>();
  return text;
}

// What a route's rules and arms look at (the prompt's length is added once it is rendered).
RouteFacts route_facts(const json& body, bool chat, const HttpRequest& req) {
  RouteFacts f;
  if (chat && body.contains("messages") && body["messages"].is_array())
    for (const json& m : body["messages"])
      if (m.is_object() && m.value("role", "") == "user" && m.contains("content"))
        f.last_user_message = content_text(m["content"]);
  if (!chat && body.contains("prompt") && body["prompt"].is_string()) f.last_user_message = body["prompt"];
  f.has_tools = body.contains("tools") && body["tools"].is_array() && !body["tools"].empty();
  f.has_response_format = body.contains("response_format") && !body["response_format"].is_null();
  f.headers = req.headers;
  f.api_key = bearer_key(req.authorization);
  if (body.contains("user") && body["user"].is_string()) f.user = body["user"];
  return f;
}

void add_route_headers(Reply& r, const std::string& model, const std::string& route, const std::string& reason) {
  r.headers.emplace_back("X-AutoGLM-Model", model);
  if (route.empty()) return;
  r.headers.emplace_back("X-AutoGLM-Route", route);
  r.headers.emplace_back("X-AutoGLM-Route-Reason", reason);
}

double uniform_draw() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0, 1)(rng);
}

Reply busy(const std::string& message) {
  Reply r = error_reply(429, message, "", "rate_limit_error");
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

}  // namespace

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

ApiService::ApiService(ServerConfig config)
    : config_(std::move(config)),
      feedback_(config_.feedback_log),
      rate_limiter_(config_.rate_limit_per_second, config_.rate_limit_burst) {}
ApiService::~ApiService() {
  shutdown();
}

void ApiService::shutdown() {
  {
    std::unique_lock<std::mutex> lock(tasks_mutex_);
    tasks_done_.wait(lock, [&] { return tasks_running_ == 0; });
  }
  ready_ = false;
  tasks_.reset();  // the task pipeline, then the engines' threads, then the models
  models_.clear();
}

namespace {

RuntimeOptions runtime_options(const ServerConfig& c) {
  RuntimeOptions o;
  o.threads = c.threads;
  o.quantize = c.quantize;
  o.architecture = c.architecture;
  o.context_window = c.context_window;
  o.kv_type = c.kv_dtype;
  o.kv_memory_mib = c.kv_cache_mib;
  o.kv_memory_fraction = c.kv_cache_fraction;
  o.kv_block_size = c.kv_block_size;
  o.prefix_cache = c.prefix_cache;
  o.chat_template = c.chat_template;
  o.max_running = c.max_running;
  o.max_batch_tokens = c.max_batch_tokens;
  o.max_queued = c.max_queued;
  o.max_step_ms = c.max_step_ms;
  o.speculative = c.speculative;
  o.draft_model = c.draft_model;
  o.draft_quantize = c.draft_quantize;
  o.exit_layer = c.exit_layer;
  o.draft_max = c.draft_max;
  o.draft_min = c.draft_min;
  o.draft_p_min = float(c.draft_p_min);
  o.profile = c.profile;
  o.limits = c.limits;
  return o;
}

}  // namespace

void ApiService::begin_stop() {
  stopping_ = true;
}

void ApiService::begin_drain() {
  draining_ = true;
}

// Counts a generation as in flight for as long as its reply holds the returned token.
std::shared_ptr<void> ApiService::track(const std::shared_ptr<StreamHandle>& handle) {
  std::lock_guard<std::mutex> lock(flight_mutex_);
  std::erase_if(in_flight_, [](const std::weak_ptr<StreamHandle>& h) { return h.expired(); });
  in_flight_.push_back(handle);
  ++generations_in_flight_;
  return std::shared_ptr<void>(nullptr, [this](void*) { --generations_in_flight_; });
}

int64_t ApiService::in_flight() {
  std::lock_guard<std::mutex> lock(tasks_mutex_);
  return generations_in_flight_.load() + tasks_running_;
}

void ApiService::cancel_in_flight() {
  {
    std::lock_guard<std::mutex> lock(flight_mutex_);
    for (const auto& weak : in_flight_)
      if (auto h = weak.lock()) h->cancel();
  }
  terminate_running_commands();  // tasks waiting on tools finish with that step's error
}

Status ApiService::load(const RuntimeOptions& base) {
  AUTOGLM_RETURN_IF_ERROR(check_access_rules(config_));
  if (config_.response_cache.enabled) {
    AUTOGLM_ASSIGN_OR_RETURN(response_cache_, ResponseCache::create(config_.response_cache));
  }
  const std::vector<ServedModel> served = served_models(config_);
  if (served.empty()) return invalid_argument("model: no model given (the 'model' key, 'models', or -m/--model)");
  // Models without a kv_cache_share split what the others leave equally.
  double shared = 0;
  int64_t unshared = 0;
  for (const ServedModel& m : served) m.kv_cache_share > 0 ? void(shared += m.kv_cache_share) : void(++unshared);
  for (const ServedModel& m : served) {
    auto s = std::make_unique<ModelService>();
    s->name = m.name;
    s->config = m.config;
    RuntimeOptions options = runtime_options(*m.config);
    const double share = m.kv_cache_share > 0 ? m.kv_cache_share : (1 - shared) / double(unshared);
    options.kv_memory_mib *= share;
    options.kv_memory_fraction *= share;
    options.repack_weights = base.repack_weights;
    options.pin_threads = base.pin_threads;
    options.progress = base.progress;
    options.threads = config_.threads;
    auto opened = models_.empty() ? Runtime::open(m.config->model, options)
                                  : Runtime::open_beside(*models_.front()->runtime, m.config->model, options);
    if (!opened) {
      if (served.size() == 1) return opened.status();
      return Status(opened.status().code(), "models: '" + m.name + "': " + opened.status().message());
    }
    s->runtime = std::move(opened).value();
    Runtime::Parts& parts = s->runtime->parts();
    parts.chat_template->set_cancel_flag(&stopping_);
    s->model = parts.model.get();
    s->tokenizer = parts.tokenizer.get();
    s->engine = parts.engine.get();
    s->prompts = parts.prompts.get();
    AUTOGLM_ASSIGN_OR_RETURN(s->pooling, resolve_pooling(config_.embeddings_pooling, m.config->model));
    models_.push_back(std::move(s));
  }
  ModelService& first = default_model();
  AUTOGLM_ASSIGN_OR_RETURN(tools_, ToolRegistry::build(config_.tools, config_.http_allowlist));
  tasks_ = std::make_shared<TaskPipeline>(*first.engine, *first.tokenizer, *first.runtime->parts().chat_template,
                                          tools_, config_.task);
  AUTOGLM_RETURN_IF_ERROR(reload_routes(config_));
  ready_ = true;
  return Status::ok();
}

Status ApiService::reload_routes(const ServerConfig& fresh) {
  std::vector<std::string> names;
  for (const auto& m : models_) names.push_back(m->name);
  const std::vector<std::string> wanted = served_model_names(fresh);
  if (!models_.empty() && wanted != names)
    return invalid_argument("the models changed (" + std::to_string(wanted.size()) +
                            " named now); models load at start only: restart the server to change them");
  AUTOGLM_RETURN_IF_ERROR(check_routes(fresh.routes, names, "routes"));
  auto table = std::make_shared<const RouteTable>(fresh.routes);
  std::lock_guard<std::mutex> lock(routes_mutex_);
  routes_ = std::move(table);
  return Status::ok();
}

std::shared_ptr<const RouteTable> ApiService::routes() const {
  std::lock_guard<std::mutex> lock(routes_mutex_);
  return routes_;
}

ModelService& ApiService::model_named(const std::string& name) {
  for (auto& m : models_)
    if (m->name == name) return *m;
  return default_model();  // routes are checked against the models when they load
}

std::string ApiService::served_list() const {
  std::string out;
  for (size_t i = 0; i < models_.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == models_.size() ? " and " : ", ") + "'" + models_[i]->name + "'";
  const auto table = routes();
  if (table && !table->empty()) {
    out += "; routes: ";
    bool first = true;
    for (const auto& [name, unused] : *table) {
      out += std::string(first ? "" : ", ") + "'" + name + "'";
      first = false;
    }
  }
  return out;
}

std::optional<Reply> ApiService::resolve(const json& body, Target& target, bool routes_ok) {
  target.model = &default_model();
  if (!body.contains("model") || body["model"].is_null()) return std::nullopt;
  if (!body["model"].is_string()) bad("model", "'model' must be a string");
  const std::string name = body["model"];
  if (name.empty()) return std::nullopt;
  for (auto& m : models_)
    if (m->name == name) {
      target.model = m.get();
      return std::nullopt;
    }
  target.routes = routes();
  if (auto it = target.routes->find(name); it != target.routes->end()) {
    if (!routes_ok)
      return error_reply(400, "'" + name + "' is a route; this endpoint takes a model (" + served_list() + ")",
                         "model");
    target.route = &it->second;
    return std::nullopt;
  }
  return error_reply(404, "the model '" + name + "' does not exist; this server serves " + served_list(), "model");
}

Reply ApiService::handle(const HttpRequest& request) {
  if (auto refused = admit(request)) return *refused;
  return handle_admitted(request);
}

Reply ApiService::handle_admitted(const HttpRequest& request) {
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

std::string path_of(const std::string& target) {
  return target.substr(0, target.find('?'));
}

std::string bearer_key(const std::string& authorization) {
  const std::string bearer = "Bearer ";
  return authorization.compare(0, bearer.size(), bearer) == 0 ? authorization.substr(bearer.size()) : "";
}

std::optional<Reply> ApiService::admit(const HttpRequest& req) {
  const std::string path = path_of(req.target);
  if (draining_ && path != "/metrics") {  // shutting down: clients go elsewhere
    Reply r = error_reply(503, "the server is shutting down", "", "service_unavailable");
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  static const std::vector<std::pair<std::string, std::string>> routes = {{"POST", "/v1/chat/completions"},
                                                                          {"POST", "/v1/completions"},
                                                                          {"GET", "/v1/models"},
                                                                          {"POST", "/tokenize"},
                                                                          {"POST", "/detokenize"},
                                                                          {"POST", "/v1/tasks"},
                                                                          {"GET", "/metrics"},
                                                                          {"GET", "/health"},
                                                                          {"POST", "/v1/embeddings"},
                                                                          {"GET", "/v1/models/*"},
                                                                          {"POST", "/v1/responses"},
                                                                          {"GET", "/v1/responses/*"},
                                                                          {"DELETE", "/v1/responses/*"},
                                                                          {"POST", "/v1/feedback"}};
  bool known = false, method_ok = false;
  for (const auto& [m, p] : routes)
    if (p == path ||
        (p.back() == '*' && path.size() > p.size() - 1 && path.compare(0, p.size() - 1, p, 0, p.size() - 1) == 0)) {
      known = true;
      method_ok = method_ok || m == req.method || (m == "GET" && req.method == "HEAD");  // HEAD: GET without a body
    }
  if (!known) return error_reply(404, "no route " + req.method + " " + path);
  // A browser's preflight: answered (with no key) when CORS is on and the origin allowed.
  if (req.method == "OPTIONS" && !cors_headers(req.origin).empty()) {
    Reply r = error_reply(204, "");
    r.body.clear();
    r.headers.emplace_back("Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE, OPTIONS");
    std::string allowed;
    for (const std::string& h : config_.cors_allow_headers) allowed += (allowed.empty() ? "" : ", ") + h;
    r.headers.emplace_back("Access-Control-Allow-Headers", allowed);
    r.headers.emplace_back("Access-Control-Max-Age", std::to_string(config_.cors_max_age));
    return r;
  }
  if (!method_ok) return error_reply(405, "method " + req.method + " is not allowed on " + path);
  if (path == "/health") return std::nullopt;
  const std::string key = bearer_key(req.authorization);
  const bool open_route = path == "/metrics" && !config_.metrics_require_key;
  if (!config_.api_keys.empty() && !open_route) {
    if (std::none_of(config_.api_keys.begin(), config_.api_keys.end(),
                     [&](const std::string& k) { return constant_time_equal(k, key); }))
      return error_reply(401,
                         !req.authorization.empty() ? "invalid API key" : "missing API key (Authorization: Bearer ...)",
                         "", "authentication_error");
  }
  if (path != "/metrics")
    if (auto wait = rate_limiter_.take(config_.api_keys.empty() ? "address " + req.client_address : "key " + key)) {
      Reply r =
          error_reply(429,
                      "too many requests from this client: at most " + json(config_.rate_limit_per_second).dump() +
                          " per second (burst " + json(config_.rate_limit_burst).dump() + ")",
                      "", "rate_limit_error");
      r.headers.emplace_back("Retry-After", std::to_string(int64_t(std::ceil(*wait))));
      return r;
    }
  return std::nullopt;
}

// An admitted request (see admit) to its route.
Reply ApiService::route(const HttpRequest& req) {
  const std::string path = path_of(req.target);
  if (path == "/health") {
    if (!ready()) return error_reply(503, "the model is loading", "", "service_unavailable");
    Reply r;
    r.body = R"({"status":"ok"})";
    return r;
  }
  if (!ready()) return error_reply(503, "the model is loading", "", "service_unavailable");
  const std::string key = bearer_key(req.authorization);
  if (path == "/metrics") return metrics_text();
  if (path == "/v1/models") return models();
  if (path.rfind("/v1/models/", 0) == 0) return model(path.substr(std::string("/v1/models/").size()));
  if (path == "/tokenize") return tokenize(req.body);
  if (path == "/detokenize") return detokenize(req.body);
  if (path == "/v1/tasks") return run_task(req.body, key);
  if (path == "/v1/embeddings") return embeddings(req.body);
  if (path == "/v1/responses") return create_response(req);
  if (path.rfind("/v1/responses/", 0) == 0) return stored_response(req.method, path.substr(14), key);
  if (path == "/v1/feedback") return feedback(req.body);
  return generate(req, path == "/v1/chat/completions");
}

std::vector<std::pair<std::string, std::string>> ApiService::cors_headers(const std::string& origin) const {
  const auto& allowed = config_.cors_allow_origins;
  if (origin.empty() || allowed.empty()) return {};
  const bool any = std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
  if (!any && std::find(allowed.begin(), allowed.end(), origin) == allowed.end()) return {};
  return {{"Access-Control-Allow-Origin", any ? "*" : origin}, {"Vary", "Origin"}};
}

namespace {

json model_object(const std::string& id, const char* kind) {
  return json{{"id", id},
              {"object", "model"},
              {"created", int64_t(std::time(nullptr))},
              {"owned_by", "open-autoglm"},
              {"kind", kind}};
}

json route_object(const Route& route) {
  static const char* const kKinds[] = {"rules", "cascade", "split"};
  json o = model_object(route.name, "route");
  o["route"] = {{"type", kKinds[int(route.kind)]}, {"models", route.models()}};
  if (route.kind == RouteKind::kSplit) {
    json weights = json::object();
    for (const SplitArm& arm : route.split.arms) weights[arm.model] = arm.weight;
    o["route"]["weights"] = weights;
  }
  return o;
}

}  // namespace

// GET /v1/models/{id}: a model or a route, or a 404 naming those served.
Reply ApiService::model(const std::string& id) {
  Reply r;
  for (const auto& m : models_)
    if (m->name == id) {
      r.body = model_object(id, "model").dump();
      return r;
    }
  const auto table = routes();
  if (auto it = table->find(id); it != table->end()) {
    r.body = route_object(it->second).dump();
    return r;
  }
  return error_reply(404, "no model '" + id + "'; this server serves " + served_list(), "model");
}

// GET /v1/models: the models, then the routes (kind "route", with the models they pick).
Reply ApiService::models() {
  json data = json::array();
  for (const auto& m : models_) data.push_back(model_object(m->name, "model"));
  for (const auto& [name, route] : *routes()) data.push_back(route_object(route));
  Reply r;
  r.body = json{{"object", "list"}, {"data", data}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

Reply ApiService::metrics_text() {
  Reply r;
  r.content_type = "text/plain; version=0.0.4";
  std::vector<EngineView> engines;
  for (const auto& m : models_) engines.push_back({m->name, &m->engine->stats(), &m->engine->op_profile()});
  r.body = metrics_.render(engines, &tools_->stats());
  if (response_cache_) r.body += response_cache_->render_metrics();
  return r;
}

// POST /v1/feedback {"response_id", "thumbs"?, "score"?, "comment"?}
Reply ApiService::feedback(const std::string& body) {
  const json j = parse_body(body, config_.limits);
  if (!feedback_.record(j))
    return error_reply(404, "no response '" + j["response_id"].get<std::string>() + "' to give feedback on",
                       "response_id");
  Reply r;
  r.body = json{{"object", "feedback"}, {"recorded", true}}.dump();
  return r;
}

// POST /v1/tasks {"input", "session"?, "max_steps"?, "seed"?, "force_action"?}: runs on its own
// thread (a task waits on several generations and tools) and replies when it is done.
Reply ApiService::run_task(const std::string& body, const std::string& api_key) {
  const json j = parse_body(body, config_.limits);
  if (!j.contains("input") || !j["input"].is_string() || j["input"].get<std::string>().empty())
    bad("input", "'input' must be a non-empty string");
  auto request = std::make_shared<TaskRequest>();
  request->input = check_utf8(j["input"].get<std::string>(), "input");
  request->owner = config_.api_keys.empty() ? "" : api_key;
  if (j.contains("session") && !j["session"].is_null()) {
    if (!j["session"].is_string()) bad("session", "'session' must be a string");
    request->session = j["session"];
    if (!tasks_->has_session(request->session, request->owner))
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
  auto tasks = tasks_;
  ServerMetrics* metrics = &metrics_;
  {
    std::lock_guard<std::mutex> lock(tasks_mutex_);
    if (tasks_running_ >= config_.max_queued)  // each task holds a thread: bound them like the queue
      return busy("too many tasks running");
    ++tasks_running_;
  }
  // A failure the request caused (an input too long for the context) is a 4xx naming the
  // field; the thread sets it before the handle publishes the event.
  auto failure = std::make_shared<std::pair<int, std::string>>(500, "");
  std::thread([this, tasks, request, handle, metrics, failure]() mutable {
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
          if (!result) {
            const StatusCode code = result.status().code();
            if (code == StatusCode::kInvalidArgument || code == StatusCode::kOutOfRange) *failure = {400, "input"};
            if (code == StatusCode::kNotFound) *failure = {404, "session"};
            if (code == StatusCode::kResourceExhausted) *failure = {429, ""};
            return fail(result.status().message());
          }
          metrics->count_task((*result)["status"]);
          ev.text = result->dump(-1, ' ', false, json::error_handler_t::replace);
        },
        [&](const std::string& what) { fail("internal error: " + what); });
    handle->push(std::move(ev));
    // Nothing of the service may be touched after the count reaches 0 (its destructor may run
    // at once): the pipeline, the request and the handle are released first.
    tasks.reset();
    request.reset();
    handle.reset();
    std::lock_guard<std::mutex> lock(tasks_mutex_);
    if (--tasks_running_ == 0) tasks_done_.notify_all();
  }).detach();
  Reply r;
  r.stream = std::make_shared<ChoiceStreams>(handle, 1, nullptr);
  // In flight until the reply has been sent, not only until the task is done.
  r.consume = [in_flight = track(handle), failure](const StreamEvent& ev, size_t) {
    ReplyChunk chunk;
    chunk.complete = true;
    chunk.status = ev.finish_reason == FinishReason::kError ? failure->first : http_status_of(ev.finish_reason);
    const char* type = chunk.status >= 500 ? "server_error" : "invalid_request_error";
    chunk.bytes = ev.finish_reason != FinishReason::kError
                      ? ev.text
                      : error_reply(chunk.status, ev.error, failure->second, type).body;
    return chunk;
  };
  return r;
}

Reply ApiService::tokenize(const std::string& body) {
  const json j = parse_body(body, config_.limits);
  if (!j.contains("content") || !j["content"].is_string()) bad("content", "'content' must be a string");
  const bool add_special = bool_param(j, "add_special", true);
  const bool with_pieces = bool_param(j, "with_pieces", false);
  Target target;
  if (auto other = resolve(j, target)) return *other;
  const Tokenizer& tokenizer = *target.model->tokenizer;
  const auto ids = tokenizer.encode(check_utf8(j["content"], "content"), add_special, true);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (with_pieces)
      tokens.push_back({{"id", id}, {"piece", tokenizer.token_to_piece(id, true)}});
    else
      tokens.push_back(id);
  }
  Reply r;
  r.body = json{{"tokens", tokens}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

Reply ApiService::detokenize(const std::string& body) {
  const json j = parse_body(body, config_.limits);
  if (!j.contains("tokens") || !j["tokens"].is_array()) bad("tokens", "'tokens' must be an array of token ids");
  Target target;
  if (auto other = resolve(j, target)) return *other;
  const Tokenizer& tokenizer = *target.model->tokenizer;
  std::vector<int32_t> ids;
  for (const auto& t : j["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tokenizer.n_vocab())
      bad("tokens", "'tokens' holds an id outside the vocabulary");
    ids.push_back(int32_t(t.get<int64_t>()));
  }
  Reply r;
  r.body = json{{"content", tokenizer.decode(ids)}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

// The request path: typed request -> prompt -> engine request -> stream handle whose
// events the response writer turns into the reply.
// The prefix-cache salt of a request: its API key's unless the cache is shared across keys,
// and the request's own cache_salt.
uint64_t ApiService::cache_salt(const std::string& api_key, const std::string& request_salt) const {
  return prefix_cache_salt(config_.prefix_cache_per_key && !config_.api_keys.empty() ? api_key : "", request_salt);
}

Reply ApiService::embeddings(const std::string& body) {
  const json j = parse_body(body, config_.limits);
  Target target;
  if (auto other = resolve(j, target)) return *other;
  const ModelService& m = *target.model;
  return embeddings_reply(j, {*m.engine, *m.prompts, m.model->spec().n_embd, m.pooling, m.name});
}

// POST /v1/responses: the chat pipeline with the Responses writer; the finished response and
// its conversation are stored (store: true) for GET and for previous_response_id, whose
// conversation comes first in the prompt (and so finds its KV in the prefix cache).
Reply ApiService::create_response(const HttpRequest& req) {
  const json j = parse_body(req.body, config_.limits);
  const std::string api_key = bearer_key(req.authorization);
  Target target;
  if (auto other = resolve(j, target, true)) return *other;
  if (target.route && target.route->kind == RouteKind::kCascade)
    return error_reply(400, "'" + target.route->name + "' is a cascade route, which serves chat and completions only",
                       "model");
  json previous = json::array();
  if (j.contains("previous_response_id") && !j["previous_response_id"].is_null()) {
    if (!j["previous_response_id"].is_string()) bad("previous_response_id", "'previous_response_id' must be a string");
    const std::string id = j["previous_response_id"];
    auto entry = responses_.get(id, api_key);
    if (!entry) return error_reply(404, "no stored response '" + id + "'", "previous_response_id");
    previous = entry->messages;
  }
  if (j.contains("store") && !j["store"].is_boolean()) bad("store", "'store' must be a boolean");
  const bool store = j.value("store", true);
  json conversation;
  try {
    const json chat_body = responses_to_chat(j, previous, conversation);
    std::optional<PreparedGeneration> prepared;
    std::string route_name;
    RouteChoice choice{target.model->name, "", ""};
    if (target.route) {
      route_name = target.route->name;
      choice = choose(*target.route, chat_body, true, req, prepared);
    }
    PreparedGeneration p =
        prepared ? std::move(*prepared) : prepare_generation(chat_body, true, api_key, model_named(choice.model));
    const std::string id = random_id("resp_");
    RequestMetrics& series = metrics_.requests(p.model->name, route_name);
    feedback_.remember(id, &series, p.model->name, route_name);
    auto writer = std::make_shared<ResponsesWriter>(j, id, p.model->name, p.shape, *p.model->tokenizer, series);
    Reply r = submit_generation(std::move(p),
                                [this, writer, conversation, store, api_key, id](const StreamEvent& ev, size_t index) {
                                  ReplyChunk chunk = writer->consume(ev, index);
                                  if (chunk.complete && store) {
                                    json all = conversation;
                                    for (const json& m : writer->output_messages()) all.push_back(m);
                                    responses_.put(id, {writer->response(), all, api_key});
                                  }
                                  return chunk;
                                });
    add_route_headers(r, choice.model, route_name, choice.reason);
    return r;
  } catch (const ParamError& e) {
    bad(responses_param(e.param), e.message);
  }
}

// GET or DELETE /v1/responses/{id}: only the key that created it sees it.
Reply ApiService::stored_response(const std::string& method, const std::string& id, const std::string& api_key) {
  Reply r;
  if (method == "DELETE") {
    if (!responses_.erase(id, api_key)) return error_reply(404, "no stored response '" + id + "'");
    r.body = json{{"id", id}, {"object", "response"}, {"deleted", true}}.dump();
    return r;
  }
  auto entry = responses_.get(id, api_key);
  if (!entry) return error_reply(404, "no stored response '" + id + "'");
  r.body = entry->response.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

RouteChoice ApiService::choose(const Route& route, const json& body, bool chat, const HttpRequest& req,
                               std::optional<PreparedGeneration>& prepared) {
  RouteFacts facts = route_facts(body, chat, req);
  RouteChoice choice;
  if (route.kind == RouteKind::kRules) {
    prepared = prepare_generation(body, chat, facts.api_key, model_named(route.default_model));
    facts.prompt_tokens = int64_t(prepared->request.prompt.size());
    choice = choose_by_rules(route, facts);
    if (choice.model != route.default_model) prepared.reset();
  } else {
    choice = choose_arm(route, facts, uniform_draw());
  }
  metrics_.count_route(route.name, choice.model, choice.decision);
  return choice;
}

Reply ApiService::generate(const HttpRequest& req, bool chat) {
  const json j = parse_body(req.body, config_.limits);
  Target target;
  if (auto other = resolve(j, target, true)) return *other;
  const std::string api_key = bearer_key(req.authorization);
  const bool no_cache = req.cache_control.find("no-cache") != std::string::npos ||
                        req.cache_control.find("no-store") != std::string::npos;
  const bool use_cache = response_cache_ && !no_cache && bool_param(j, "cache", true);
  if (!target.route) {
    Reply r = generate_on(prepare_generation(j, chat, api_key, *target.model), j, "", use_cache);
    add_route_headers(r, target.model->name, "", "");
    return r;
  }
  const Route& route = *target.route;
  if (route.kind == RouteKind::kCascade) return cascade(route, j, chat, api_key);
  std::optional<PreparedGeneration> prepared;
  const RouteChoice choice = choose(route, j, chat, req, prepared);
  Reply r =
      generate_on(prepared ? std::move(*prepared) : prepare_generation(j, chat, api_key, model_named(choice.model)), j,
                  route.name, use_cache);
  add_route_headers(r, choice.model, route.name, choice.reason);
  return r;
}

Reply ApiService::generate_on(PreparedGeneration p, const json& j, const std::string& route, bool use_cache) {
  ModelService& m = *p.model;
  RequestMetrics& series = metrics_.requests(m.name, route);
  feedback_.remember(p.shape.id, &series, m.name, route);
  auto writer = std::make_shared<ResponseWriter>(p.shape, *m.tokenizer, series);
  auto consume = [writer](const StreamEvent& ev, size_t choice) { return writer->consume(ev, choice); };
  const std::optional<std::string> key =
      use_cache ? response_cache_key(m.name, p.shape.chat, p.request.prompt, j, p.request) : std::nullopt;
  if (!key) return submit_generation(std::move(p), consume);
  if (auto hit = response_cache_->find(*key)) {
    Reply r = replay(*hit, p, consume);
    r.headers.emplace_back("X-AutoGLM-Cache", "hit");
    return r;
  }
  auto recorder = std::make_shared<GenerationRecorder>(size_t(p.params.n));
  Reply r = submit_generation(
      std::move(p), [consume, recorder, cache = response_cache_, key = *key](const StreamEvent& ev, size_t choice) {
        recorder->record(ev, choice);
        ReplyChunk chunk = consume(ev, choice);
        if (chunk.complete && recorder->whole()) cache->insert(key, recorder->take());
        return chunk;
      });
  r.headers.emplace_back("X-AutoGLM-Cache", "miss");
  return r;
}

// A cascade: the light model's first tokens decide whether it answers or the heavy one does
// (see CascadeStream); both prompts are rendered up front, each with its model's template.
Reply ApiService::cascade(const Route& route, const json& j, bool chat, const std::string& api_key) {
  PreparedGeneration light = prepare_generation(j, chat, api_key, model_named(route.cascade.light));
  PreparedGeneration heavy = prepare_generation(j, chat, api_key, model_named(route.cascade.heavy));
  if (light.params.n > 1) bad("n", "a cascade route answers with one choice ('n' must be 1)");
  heavy.shape.id = light.shape.id;  // one response, whichever model gives it
  const int32_t wanted_logprobs = light.request.top_logprobs;
  light.request.top_logprobs = std::max(1, wanted_logprobs);  // the confidence is the top-1 probability
  RequestMetrics& light_series = metrics_.requests(light.model->name, route.name);
  RequestMetrics& heavy_series = metrics_.requests(heavy.model->name, route.name);
  auto light_writer = std::make_shared<ResponseWriter>(light.shape, *light.model->tokenizer, light_series);
  auto heavy_writer = std::make_shared<ResponseWriter>(heavy.shape, *heavy.model->tokenizer, heavy_series);
  auto light_handle = light.model->engine->submit(light.request);
  if (!light_handle) {
    if (light_handle.status().code() == StatusCode::kResourceExhausted) return busy(light_handle.status().message());
    bad(light.prompt_param, light_handle.status().message());
  }
  auto decision = std::make_shared<std::optional<CascadeDecision>>();  // set on an engine thread, read after
  auto tracked = std::make_shared<std::vector<std::shared_ptr<void>>>();
  tracked->push_back(track(*light_handle));
  Engine* heavy_engine = heavy.model->engine;
  auto submit_heavy = [this, heavy_engine, request = heavy.request, tracked]() {
    auto handle = heavy_engine->submit(request);
    if (handle) tracked->push_back(track(*handle));
    return handle;
  };
  const std::string light_name = light.model->name, heavy_name = heavy.model->name, id = light.shape.id;
  auto on_decided = [this, decision, route_name = route.name, light_name, heavy_name, id, &light_series,
                     &heavy_series](const CascadeDecision& d) {
    *decision = d;
    const std::string& answered = d.escalated ? heavy_name : light_name;
    metrics_.count_route(route_name, answered, d.escalated ? "escalated" : "kept");
    feedback_.remember(id, d.escalated ? &heavy_series : &light_series, answered, route_name);
  };
  auto stream = CascadeStream::start(*light_handle, route.cascade, wanted_logprobs, submit_heavy, on_decided);
  tracked->push_back(track(stream->output()));
  Reply r;
  r.stream = std::make_shared<ChoiceStreams>(stream->output(), 1, nullptr);
  r.streaming = light.params.stream;
  if (r.streaming) r.content_type = "text/event-stream";
  r.consume = [decision, light_writer, heavy_writer, tracked](const StreamEvent& ev, size_t index) {
    return (*decision && (*decision)->escalated ? heavy_writer : light_writer)->consume(ev, index);
  };
  r.decided_headers = [decision, light_name, heavy_name, route_name = route.name]() {
    Reply headers;
    const bool escalated = *decision && (*decision)->escalated;
    add_route_headers(headers, escalated ? heavy_name : light_name, route_name,
                      *decision ? "cascade: " + (*decision)->reason : "cascade");
    return headers.headers;
  };
  return r;
}

Reply ApiService::replay(const CachedGeneration& cached, const PreparedGeneration& p,
                         std::function<ReplyChunk(const StreamEvent&, size_t)> consume) {
  std::vector<std::shared_ptr<StreamHandle>> handles;
  for (const std::vector<StreamEvent>& events : cached.choices) {
    handles.push_back(std::make_shared<StreamHandle>());
    for (const StreamEvent& ev : events) handles.back()->push(ev);
  }
  Reply r;
  r.stream = std::make_shared<ChoiceStreams>(
      handles[0], handles.size(),
      [handles](size_t index) -> Result<std::shared_ptr<StreamHandle>> { return handles[index]; });
  r.streaming = p.params.stream;
  if (r.streaming) r.content_type = "text/event-stream";
  r.consume = std::move(consume);
  return r;
}

// A chat or completions body as the engine request and the response's shape (throws
// ParamError naming the field).
ApiService::PreparedGeneration ApiService::prepare_generation(const json& j, bool chat, const std::string& api_key,
                                                              ModelService& m) {
  PreparedGeneration p;
  p.model = &m;
  ResponseShape& shape = p.shape;
  GenerationParams& params = p.params;
  std::vector<int32_t> prompt;
  const char* prompt_param = chat ? "messages" : "prompt";
  p.prompt_param = prompt_param;
  if (chat) {
    ChatRequest request = parse_chat_request(j, config_);
    std::string error_param;
    auto built = m.prompts->build(request.conversation, &error_param);
    if (!built) bad(error_param, built.status().message());
    prompt = std::move(built->ids);
    params = std::move(request.params);
    if (built->forced_call) params.grammar = built->forced_call;
    if (request.conversation.tool_choice != ToolChoice::kNone) {
      shape.tool_names = tool_function_names(request.conversation.tools);
      shape.family = m.prompts->family();
      shape.call_id_prefix = "call_" + std::to_string(next_id_.load()) + "_";
      shape.parallel_tool_calls = request.parallel_tool_calls;
    }
  } else {
    CompletionRequest request = parse_completion_request(j, config_);
    prompt = m.prompts->encode_text(request.prompt);
    params = std::move(request.params);
  }
  shape.chat = chat;
  shape.stream = params.stream;
  shape.include_usage = params.include_usage;
  shape.logprobs = params.logprobs;
  shape.id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
  shape.model = m.name;
  shape.created = int64_t(std::time(nullptr));
  shape.choices = size_t(params.n);

  GenerationRequest& g = p.request;
  g = engine_request(params, std::move(prompt), m.model->generation_defaults(), m.engine->config().n_ctx);
  g.cache_salt = cache_salt(api_key, params.cache_salt);
  for (const auto& [token, bias] : g.sampling.logit_bias)
    if (token >= m.tokenizer->n_vocab()) {
      std::string where = "logit_bias.";
      where += std::to_string(token);
      bad(where, "token id " + std::to_string(token) + " is outside the vocabulary (" +
                     std::to_string(m.tokenizer->n_vocab()) + " tokens)");
    }
  if (auto over = check_request_limits(g, config_.limits))
    bad(over->param == "prompt" ? prompt_param : over->param, over->message);
  return p;
}

// Submits the prepared request (n choices: see ChoiceStreams); `consume` turns its events
// into the reply's bytes.
Reply ApiService::submit_generation(PreparedGeneration p,
                                    std::function<ReplyChunk(const StreamEvent&, size_t)> consume) {
  GenerationRequest& g = p.request;
  auto in_flight = std::make_shared<std::vector<std::shared_ptr<void>>>();
  Engine* engine = p.model->engine;
  ChoiceStreams::Submit submit_choice = [this, engine, g,
                                         in_flight](size_t index) -> Result<std::shared_ptr<StreamHandle>> {
    GenerationRequest choice = g;
    if (choice.sampling.seed) choice.sampling.seed = *choice.sampling.seed + index;
    auto handle = engine->submit(std::move(choice));
    if (handle) in_flight->push_back(track(*handle));
    return handle;
  };
  auto handle = engine->submit(std::move(g));
  if (!handle) {
    if (handle.status().code() == StatusCode::kResourceExhausted) return busy(handle.status().message());
    bad(p.prompt_param, handle.status().message());
  }
  in_flight->push_back(track(*handle));
  Reply r;
  r.stream = std::make_shared<ChoiceStreams>(*handle, size_t(p.params.n), std::move(submit_choice));
  r.streaming = p.params.stream;
  if (r.streaming) r.content_type = "text/event-stream";
  r.consume = [consume = std::move(consume), in_flight](const StreamEvent& ev, size_t choice) {
    return consume(ev, choice);
  };
  return r;
}

}  // namespace autoglm
