#include "server/api.h"

#include <algorithm>
#include <cmath>

#include "core/random_id.h"
#include "server/api/anthropic_messages.h"
#include "server/config/routing_config.h"
#include "server/http/route_table.h"

namespace autoglm {
namespace {

// A reply in the conventions of the API its path belongs to (the Messages API's errors are
// Anthropic's shape).
Reply in_api_shape(const HttpRequest& req, Reply reply) {
  const RouteLookup found = find_route(req.method, path_of(req.target));
  const HttpRoute* route = found.route ? found.route : found.on_path;
  return route && route->errors == ErrorShape::kAnthropic ? anthropic_reply(std::move(reply)) : reply;
}

}  // namespace

ApiService::ApiService(ServerConfig config)
    : config_(std::move(config)),
      rate_limiter_(config_.rate_limit_per_second, config_.rate_limit_burst),
      generation_(config_, metrics_, catalog_, in_flight_),
      tasks_(config_, metrics_, in_flight_),
      jobs_(config_, catalog_, generation_, tasks_, [this] { return stopping_ || draining_; }),
      loras_(config_, catalog_),
      model_routes_(config_, catalog_),
      probes_(config_, metrics_, catalog_, ready_, draining_,
              {[this] { return tasks_.tool_stats(); },
               [this](std::string& out) {
                 out += generation_.cache_metrics();
                 jobs_.metrics(out);
                 loras_.metrics(out);
                 model_routes_.metrics(out);
               }}) {
  generation_.bind(handlers_);
  tasks_.bind(handlers_);
  jobs_.bind(handlers_);
  loras_.bind(handlers_);
  model_routes_.bind(handlers_);
  probes_.bind(handlers_);
}

ApiService::~ApiService() {
  shutdown();
}

void ApiService::shutdown() {
  tasks_.wait_idle();
  ready_ = false;
  jobs_.stop();      // the runners first: they call the engines, the tasks and the batches
  tasks_.release();  // the task pipeline, then the engines' threads, then the models
  // Its thread, then every runtime. The models stay (unloaded) while the service lives: a reply a
  // closing connection still holds drops its hold into them.
  if (catalog_.shelf) catalog_.shelf->stop();
}

void ApiService::begin_stop() {
  stopping_ = true;
}

void ApiService::begin_drain() {
  draining_ = true;
}

int64_t ApiService::in_flight() {
  return in_flight_.count() + tasks_.running();
}

void ApiService::cancel_in_flight() {
  in_flight_.cancel_all();
  tasks_.terminate_commands();  // tasks waiting on tools finish with that step's error
}

Runtime& ApiService::default_runtime() {
  return *catalog_.default_model().runtime;  // tests only, with the first model loaded
}

Status ApiService::reload_routes(const ServerConfig& fresh) {
  return catalog_.reload_routes(fresh);
}

Status ApiService::load(const RuntimeOptions& base) {
  AUTOGLM_RETURN_IF_ERROR(check_access_rules(config_));
  AUTOGLM_RETURN_IF_ERROR(generation_.start());
  AUTOGLM_RETURN_IF_ERROR(load_models(base));
  // Tasks run on the first model, held for each step (it may be asleep or unloaded between).
  auto first_model = [this]() -> Result<TaskPipeline::HeldRuntime> {
    AUTOGLM_ASSIGN_OR_RETURN(ModelHold held, catalog_.shelf->hold(catalog_.default_model()));
    return TaskPipeline::HeldRuntime{held.runtime, held.token};
  };
  AUTOGLM_RETURN_IF_ERROR(tasks_.start(first_model, listening_));
  AUTOGLM_RETURN_IF_ERROR(catalog_.reload_routes(config_));
  AUTOGLM_RETURN_IF_ERROR(jobs_.start());
  ready_ = true;
  jobs_.run();  // once ready: the jobs it resumes are answered, not told "loading"
  return Status::ok();
}

// Every served model on the shelf: those configured load now, in order (the later ones beside
// the first, on its threads), with the LoRA adapters the configuration names over them; those of
// models_dir when first asked for.
Status ApiService::load_models(const RuntimeOptions& base) {
  std::vector<std::unique_ptr<ModelService>>& models = catalog_.models;
  const std::vector<ServedModel> served = served_models(config_);
  if (served.empty())
    return invalid_argument(
        config_.models_dir.empty()
            ? "model: no model given (the 'model' key, 'models', 'models_dir', -m/--model or --models-dir)"
            : "models_dir: '" + config_.models_dir + "' holds no model (GGUF files or folders)");
  // Models without a kv_cache_share split what the others leave equally; each of models_dir has
  // the whole budget (models_max bounds how many are loaded).
  double shared = 0;
  int64_t unshared = 0;
  for (const ServedModel& m : served)
    if (!m.on_demand) m.kv_cache_share > 0 ? void(shared += m.kv_cache_share) : void(++unshared);
  std::vector<double> shares;
  for (const ServedModel& m : served) {
    auto s = std::make_unique<ModelService>();
    s->name = m.name;
    s->aliases = m.aliases;
    s->config = m.config;
    s->on_demand = m.on_demand;
    models.push_back(std::move(s));
    shares.push_back(m.on_demand ? 1.0 : m.kv_cache_share > 0 ? m.kv_cache_share : (1 - shared) / double(unshared));
  }
  ModelShelf::Options shelf;
  shelf.max_loaded = models_max_of(config_);
  shelf.sleep_idle_seconds = config_.sleep_idle_seconds;
  shelf.autoload = config_.models_autoload;
  shelf.open = [this, base, shares, several = served.size() > 1](
                   ModelService& m, const Runtime* other) -> Result<std::unique_ptr<Runtime>> {
    const size_t index = size_t(
        std::find_if(catalog_.models.begin(), catalog_.models.end(), [&](const auto& p) { return p.get() == &m; }) -
        catalog_.models.begin());
    auto opened = open_model(m, base, shares[index], other);
    if (!opened && several && !m.on_demand)  // at start: which of the models failed
      return Status(opened.status().code(), "models: '" + m.name + "': " + opened.status().message());
    return opened;
  };
  shelf.on_event = [this](const ModelService& m, const std::string& event, double seconds) {
    metrics_.count_model_event(m.name, event, seconds);
  };
  catalog_.shelf = std::make_unique<ModelShelf>(models, std::move(shelf));
  return catalog_.shelf->start();
}

// One model's runtime with the configured LoRA adapters over it.
Result<std::unique_ptr<Runtime>> ApiService::open_model(ModelService& m, const RuntimeOptions& base, double kv_share,
                                                        const Runtime* other) {
  RuntimeOptions options = m.config->runtime;
  options.kv_memory_mib *= kv_share;
  options.kv_memory_fraction *= kv_share;
  options.repack_weights = base.repack_weights;
  options.pin_threads = base.pin_threads;
  options.progress = [this, &m, forward = base.progress](const std::string& step, int64_t done, int64_t total) {
    catalog_.shelf->set_progress(m, step + " " + std::to_string(done) + "/" + std::to_string(total));
    if (forward) forward(step, done, total);
  };
  options.threads = config_.runtime.threads;
  options.cancel_renders = &stopping_;
  AUTOGLM_ASSIGN_OR_RETURN(
      std::unique_ptr<Runtime> runtime,
      other ? Runtime::open_beside(*other, m.config->model, options) : Runtime::open(m.config->model, options));
  m.pooling = config_.embeddings_pooling.value_or(runtime->info().pooling);
  for (const LoraAdapterConfig& a : m.config->lora_adapters) {
    const std::string where = "lora_adapters." + a.name;
    if (Status taken = catalog_.lora_name_free(a.name); !taken.is_ok())
      return Status(taken.code(), where + ": " + taken.message());
    if (Status st = runtime->load_lora(a.name, a.path, a.scale); !st.is_ok())
      return Status(st.code(), where + ": " + st.message());
  }
  return runtime;
}

Reply ApiService::handle(const HttpRequest& request) {
  if (auto refused = admit(request)) return *refused;
  return handle_admitted(request);
}

Reply ApiService::handle_admitted(const HttpRequest& request) {
  return in_api_shape(request, handle_checked(request));
}

Reply ApiService::handle_checked(const HttpRequest& request) {
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
  std::optional<Reply> refused = check_admission(req);
  if (refused) refused = in_api_shape(req, std::move(*refused));
  return refused;
}

std::optional<Reply> ApiService::check_admission(const HttpRequest& req) {
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
  const std::string key = api_key_of(req);
  const bool open_route = access == Access::kMetrics && !config_.metrics_require_key;
  if (!config_.api_keys.empty() && !open_route) {
    if (!accepts_key(key))
      return error_reply(401,
                         !key.empty() || !req.authorization.empty()
                             ? "invalid API key"
                             : "missing API key (Authorization: Bearer ..., or x-api-key)",
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
  const RouteHandler& handler = handlers_.of(found.route->endpoint);
  if (!handler) return error_reply(404, "no route " + req.method + " " + path);  // every endpoint is bound
  return handler(req, found);
}

std::vector<std::pair<std::string, std::string>> ApiService::cors_headers(const std::string& origin) const {
  const auto& allowed = config_.cors_allow_origins;
  if (origin.empty() || allowed.empty()) return {};
  const bool any = std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
  if (!any && std::find(allowed.begin(), allowed.end(), origin) == allowed.end()) return {};
  return {{"Access-Control-Allow-Origin", any ? "*" : origin}, {"Vary", "Origin"}};
}

int64_t ApiService::body_limit(const HttpRequest& head) const {
  const HttpRoute* route = find_route(head.method, path_of(head.target)).route;
  const bool upload = route && route->body == BodyLimit::kUpload && !config_.jobs.data_dir.empty();
  return upload ? std::max(config_.max_body_bytes, config_.jobs.max_file_bytes + (64 << 10)) : config_.max_body_bytes;
}

}  // namespace autoglm
