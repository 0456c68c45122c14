#include "server/api.h"

#include "server/api/embeddings_route.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/last_resort.h"
#include "core/random_id.h"
#include "core/read_file.h"
#include "server/api/openai_request.h"
#include "server/config/routing_config.h"
#include "server/http/route_table.h"
#include "tasks/subprocess.h"
#include "tasks/task_pipeline.h"

namespace autoglm {

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
  if (jobs_) jobs_->stop();  // the runners first: they call the engines and the batches
  batches_.reset();
  jobs_.reset();
  tasks_.reset();  // the task pipeline, then the engines' threads, then the models
  models_.clear();
}

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
    RuntimeOptions options = m.config->runtime;
    const double share = m.kv_cache_share > 0 ? m.kv_cache_share : (1 - shared) / double(unshared);
    options.kv_memory_mib *= share;
    options.kv_memory_fraction *= share;
    options.repack_weights = base.repack_weights;
    options.pin_threads = base.pin_threads;
    options.progress = base.progress;
    options.threads = config_.runtime.threads;
    options.cancel_renders = &stopping_;
    auto opened = models_.empty() ? Runtime::open(m.config->model, options)
                                  : Runtime::open_beside(*models_.front()->runtime, m.config->model, options);
    if (!opened) {
      if (served.size() == 1) return opened.status();
      return Status(opened.status().code(), "models: '" + m.name + "': " + opened.status().message());
    }
    s->runtime = std::move(opened).value();
    s->info = s->runtime->info();
    s->pooling = config_.embeddings_pooling.value_or(s->info.pooling);
    models_.push_back(std::move(s));
    for (const LoraAdapterConfig& a : m.config->lora_adapters) {
      const std::string where = (served.size() == 1 ? "" : "models: '" + m.name + "': ") + "lora_adapters." + a.name;
      if (Status taken = lora_name_free(a.name); !taken.is_ok())
        return Status(taken.code(), where + ": " + taken.message());
      if (Status st = models_.back()->runtime->load_lora(a.name, a.path, a.scale); !st.is_ok())
        return Status(st.code(), where + ": " + st.message());
    }
  }
  ModelService& first = default_model();
  AUTOGLM_ASSIGN_OR_RETURN(tools_, ToolRegistry::build(config_.tools, config_.http_allowlist, listening_));
  tasks_ = std::make_shared<TaskPipeline>(*first.runtime, tools_, config_.task);
  AUTOGLM_RETURN_IF_ERROR(reload_routes(config_));
  if (!config_.jobs.data_dir.empty()) {
    AUTOGLM_ASSIGN_OR_RETURN(jobs_, AsyncJobs::start(config_.jobs, config_.api_keys,
                                                     [this](const Job& job, const std::string& key, JobRun& run) {
                                                       return run_job(job, key, run);
                                                     }));
    AUTOGLM_ASSIGN_OR_RETURN(batches_, Batches::start(*jobs_, config_.jobs));
  }
  ready_ = true;
  if (jobs_) jobs_->run();  // once ready: the jobs it resumes are answered, not told "loading"
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
  for (const auto& [name, route] : fresh.routes)
    if (adapter_base(name))
      return invalid_argument("routes." + name + ": '" + name + "' is the name of a LoRA adapter");
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
  if (!body.contains("model") || body["model"].is_null()) return resolve(std::string(), target, routes_ok);
  if (!body["model"].is_string()) bad("model", "'model' must be a string");
  return resolve(body["model"].get<std::string>(), target, routes_ok);
}

std::optional<Reply> ApiService::resolve(const std::string& name, Target& target, bool routes_ok) {
  target.model = &default_model();
  if (name.empty()) return std::nullopt;
  for (auto& m : models_)
    if (m->name == name) {
      target.model = m.get();
      return std::nullopt;
    }
  if (ModelService* base = adapter_base(name)) {  // held once the request is prepared
    target.model = base;
    target.lora = name;
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
  // A parsed body takes many times its bytes when it is all small values (four 8 MiB bodies of
  // [[],[],...] added 512 MB): that memory is held from the body budget before parsing.
  const int64_t overhead = parsed_json_overhead(request.body);
  const int64_t most =
      std::min(config_.max_body_bytes_in_flight, std::max(body_budget_share(config_), config_.max_body_bytes));
  if (request.hold_memory && overhead > 0 && int64_t(request.body.size()) + overhead > most)  // never fits
    return error_reply(413, "the body would take about " + std::to_string(int64_t(request.body.size()) + overhead) +
                                " bytes parsed (its JSON values count too), more than the " + std::to_string(most) +
                                " one client may hold (max_body_bytes_in_flight_per_client)");
  if (request.hold_memory && !request.hold_memory(overhead)) {
    Reply busy = error_reply(503, "too much request data in flight (a parsed body counts too); try again shortly", "",
                             "service_unavailable");
    busy.headers.emplace_back("Retry-After", "1");
    return busy;
  }
  return guarded_reply([&] { return route(request); });
}

bool ApiService::accepts_key(const std::string& key) const {
  return std::any_of(config_.api_keys.begin(), config_.api_keys.end(),
                     [&](const std::string& k) { return constant_time_equal(k, key); });
}

std::optional<Reply> ApiService::admit(const HttpRequest& req) {
  const std::string path = path_of(req.target);
  const RouteLookup found = find_route(req.method, path);  // the path's access is its routes' (they agree)
  const Access access = found.on_path ? found.on_path->access : Access::kKey;
  // Shutting down: clients go elsewhere; the probes and /metrics still answer.
  if (draining_ && access != Access::kProbe && access != Access::kMetrics) {
    Reply r = error_reply(503, "the server is shutting down", "", "service_unavailable");
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  // A browser's preflight: answered (with no key) when CORS is on and the origin allowed.
  if (!found.not_found() && req.method == "OPTIONS" && !cors_headers(req.origin).empty()) {
    Reply r = error_reply(204, "");
    r.body.clear();
    r.headers.emplace_back("Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE, OPTIONS");
    std::string allowed;
    for (const std::string& h : config_.cors_allow_headers) allowed += (allowed.empty() ? "" : ", ") + h;
    r.headers.emplace_back("Access-Control-Allow-Headers", allowed);
    r.headers.emplace_back("Access-Control-Max-Age", std::to_string(config_.cors_max_age));
    return r;
  }
  // The probes (open to all), and the web UI's files (they hold no data: the pages ask for a
  // key themselves): no key, no rate limit.
  if (found.route && (access == Access::kProbe || access == Access::kWebUi)) return std::nullopt;
  const std::string key = bearer_key(req.authorization);
  const bool open_route = access == Access::kMetrics && !config_.metrics_require_key;
  if (!config_.api_keys.empty() && !open_route) {
    if (!accepts_key(key))
      return error_reply(401,
                         !req.authorization.empty() ? "invalid API key" : "missing API key (Authorization: Bearer ...)",
                         "", "authentication_error");
  }
  // After the key: without one, which routes exist is not told.
  if (found.not_found()) return error_reply(404, "no route " + req.method + " " + path);
  if (found.method_not_allowed()) return error_reply(405, "method " + req.method + " is not allowed on " + path);
  if (access != Access::kMetrics)
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

// An admitted request (see admit) to the handler of its route's endpoint.
Reply ApiService::route(const HttpRequest& req) {
  const std::string path = path_of(req.target);
  const RouteLookup found = find_route(req.method, path);
  if (found.not_found()) return error_reply(404, "no route " + req.method + " " + path);  // admit refuses these
  if (found.method_not_allowed()) return error_reply(405, "method " + req.method + " is not allowed on " + path);
  const Access access = found.route->access;
  // The probes and the web UI answer while the model loads.
  if (access != Access::kProbe && access != Access::kWebUi && !ready())
    return error_reply(503, "the model is loading", "", "service_unavailable");
  const std::string key = bearer_key(req.authorization);
  const auto param = [&](std::string_view name) { return std::string(found.params[name]); };
  switch (found.route->endpoint) {
    case Endpoint::kChatCompletions: return generate(req, GenerationKind::kChat);
    case Endpoint::kCompletions: return generate(req, GenerationKind::kCompletion);
    case Endpoint::kEmbeddings: return embeddings(req.body);
    case Endpoint::kCreateResponse: return create_response(req);
    case Endpoint::kGetResponse:
    case Endpoint::kDeleteResponse: return stored_response(req.method, param("id"), key);
    case Endpoint::kModels: return models();
    case Endpoint::kModel: return model(param("model"));
    case Endpoint::kTokenize: return tokenize(req.body);
    case Endpoint::kDetokenize: return detokenize(req.body);
    case Endpoint::kTasks: return run_task(req.body, key);
    case Endpoint::kFeedback: return feedback(req.body);
    case Endpoint::kAsyncChatCompletions: return submit_job(Endpoint::kChatCompletions, req.body, key);
    case Endpoint::kAsyncCompletions: return submit_job(Endpoint::kCompletions, req.body, key);
    case Endpoint::kAsyncTasks: return submit_job(Endpoint::kTasks, req.body, key);
    case Endpoint::kListJobs: return jobs(req.target, key);
    case Endpoint::kGetJob:
    case Endpoint::kCancelJob: return job(req.method, param("id"), key);
    case Endpoint::kUploadFile:
    case Endpoint::kListFiles:
    case Endpoint::kGetFile:
    case Endpoint::kDeleteFile:
    case Endpoint::kFileContent: return files_route(req, key);
    case Endpoint::kCreateBatch:
    case Endpoint::kListBatches:
    case Endpoint::kGetBatch:
    case Endpoint::kCancelBatch: return batches_route(req, key);
    case Endpoint::kLoadLoraAdapter: return load_lora_adapter(req.body);
    case Endpoint::kUnloadLoraAdapter: return unload_lora_adapter(req.body);
    case Endpoint::kMetrics: return metrics_text();
    case Endpoint::kHealth: return health();
    case Endpoint::kReady: return readiness();
    case Endpoint::kWebIndex:
    case Endpoint::kDashboard:
    case Endpoint::kWebAsset: return web_page(path);
  }
  return error_reply(404, "no route " + req.method + " " + path);  // not reached: every endpoint has a case
}

std::vector<std::pair<std::string, std::string>> ApiService::cors_headers(const std::string& origin) const {
  const auto& allowed = config_.cors_allow_origins;
  if (origin.empty() || allowed.empty()) return {};
  const bool any = std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
  if (!any && std::find(allowed.begin(), allowed.end(), origin) == allowed.end()) return {};
  return {{"Access-Control-Allow-Origin", any ? "*" : origin}, {"Vary", "Origin"}};
}

json model_object(const std::string& id, const char* kind) {
  return json{{"id", id},
              {"object", "model"},
              {"created", int64_t(std::time(nullptr))},
              {"owned_by", "open-autoglm"},
              {"kind", kind}};
}

namespace {

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
  for (const json& adapter : lora_objects())
    if (adapter["id"] == id) {
      r.body = adapter.dump(-1, ' ', false, json::error_handler_t::replace);
      return r;
    }
  return error_reply(404, "no model '" + id + "'; this server serves " + served_list(), "model");
}

// GET /v1/models: the models, then the routes (kind "route", with the models they pick).
Reply ApiService::models() {
  json data = json::array();
  for (const auto& m : models_) data.push_back(model_object(m->name, "model"));
  for (const auto& [name, route] : *routes()) data.push_back(route_object(route));
  for (const json& adapter : lora_objects()) data.push_back(adapter);
  Reply r;
  r.body = json{{"object", "list"}, {"data", data}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

Reply ApiService::metrics_text() {
  Reply r;
  r.content_type = "text/plain; version=0.0.4";
  std::vector<EngineView> engines;
  for (const auto& m : models_) {
    const ModelInfo info = m->runtime->info();
    engines.push_back({m->name, m->runtime->stats(), info.device, info.device_weight_bytes, info.kv_bytes});
  }
  r.body = metrics_.render(engines, &tools_->stats());
  if (response_cache_) r.body += response_cache_->render_metrics();
  if (jobs_) jobs_metrics(r.body);
  lora_metrics(r.body);
  return r;
}

// POST /v1/feedback {"response_id", "thumbs"?, "score"?, "comment"?}
Reply ApiService::feedback(const std::string& body) {
  const json j = parse_body(body, config_.runtime.limits);
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
  const json j = parse_body(body, config_.runtime.limits);
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
  auto [handle, append] = StreamHandle::relay();
  // The reply's handle is cancelled when the client goes (or a drain ends it): the task stops.
  request->cancelled = [weak = std::weak_ptr<StreamHandle>(handle)] {
    const auto h = weak.lock();
    return !h || h->cancelled();
  };
  auto tasks = tasks_;
  ServerMetrics* metrics = &metrics_;
  {
    std::lock_guard<std::mutex> lock(tasks_mutex_);
    if (tasks_running_ >= config_.runtime.max_queued)  // each task holds a thread: bound them like the queue
      return busy_reply("too many tasks running");
    ++tasks_running_;
  }
  // A failure the request caused (an input too long for the context) is a 4xx naming the
  // field; the thread sets it before the handle publishes the event.
  auto failure = std::make_shared<std::pair<int, std::string>>(500, "");
  std::thread([this, tasks, request, handle, append, metrics, failure]() mutable {
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
    append(std::move(ev));
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
  r.input_end_cancels = true;
  // In flight until the reply has been sent, not only until the task is done.
  r.consume = [in_flight = track(handle), failure](const StreamEvent& ev, size_t) {
    ReplyChunk chunk;
    chunk.complete = true;
    chunk.status = ev.finish_reason == FinishReason::kError ? failure->first : http_status_of(ev.finish_reason);
    const char* type = chunk.status >= 500   ? "server_error"
                       : chunk.status == 429 ? "rate_limit_error"
                                             : "invalid_request_error";
    chunk.bytes = ev.finish_reason != FinishReason::kError
                      ? ev.text
                      : error_reply(chunk.status, ev.error, failure->second, type).body;
    return chunk;
  };
  // A full engine queue is a 429 that says when to come back, as busy_reply does.
  r.decided = [failure]() {
    Reply::Decided d;
    if (failure->first == 429) d.headers = {{"Retry-After", "1"}};
    return d;
  };
  return r;
}

Reply ApiService::tokenize(const std::string& body) {
  const json j = parse_body(body, config_.runtime.limits);
  if (!j.contains("content") || !j["content"].is_string()) bad("content", "'content' must be a string");
  const bool add_special = bool_param(j, "add_special", true);
  const bool with_pieces = bool_param(j, "with_pieces", false);
  Target target;
  if (auto other = resolve(j, target)) return *other;
  const Runtime& tokenizer = *target.model->runtime;
  const auto ids = tokenizer.encode(check_utf8(j["content"], "content"), add_special, true);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (with_pieces)
      tokens.push_back({{"id", id}, {"piece", tokenizer.token_piece(id)}});
    else
      tokens.push_back(id);
  }
  Reply r;
  r.body = json{{"tokens", tokens}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

Reply ApiService::detokenize(const std::string& body) {
  const json j = parse_body(body, config_.runtime.limits);
  if (!j.contains("tokens") || !j["tokens"].is_array()) bad("tokens", "'tokens' must be an array of token ids");
  Target target;
  if (auto other = resolve(j, target)) return *other;
  const Runtime& tokenizer = *target.model->runtime;
  std::vector<int32_t> ids;
  for (const auto& t : j["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tokenizer.vocab_size())
      bad("tokens", "'tokens' holds an id outside the vocabulary");
    ids.push_back(int32_t(t.get<int64_t>()));
  }
  Reply r;
  r.body = json{{"content", tokenizer.decode(ids)}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

Reply ApiService::embeddings(const std::string& body) {
  const json j = parse_body(body, config_.runtime.limits);
  Target target;
  if (auto other = resolve(j, target)) return *other;
  ModelService& m = *target.model;
  return embeddings_reply(j, {*m.runtime, m.info.n_embd, m.pooling, m.name});
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

}  // namespace autoglm
