// The OpenAI-compatible API over the engine: routes, validation, chat templates,
// response and SSE chunk shapes. Transport-free, so tests can call it directly.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/runtime.h"
#include "server/api/choice_streams.h"
#include "server/api/feedback.h"
#include "server/api/openai_request.h"
#include "server/api/reply.h"
#include "server/api/response_writer.h"
#include "server/api/responses_api.h"
#include "server/config/config.h"
#include "server/http/http_service.h"
#include "server/http/rate_limiter.h"
#include "server/http/route_table.h"
#include "server/jobs/batches.h"
#include "server/metrics/metrics.h"
#include "server/routing/response_cache.h"

namespace autoglm {

// A /v1/models entry: id, object, created, owned_by, and its kind ("model", "route", "lora").
json model_object(const std::string& id, const char* kind);

// One served model once loaded: its runtime and how the API names it.
struct ModelService {
  std::string name;
  std::shared_ptr<const ServerConfig> config;  // the server's, with the model's own keys on top
  std::unique_ptr<Runtime> runtime;
  ModelInfo info;                    // the runtime's, read once loaded
  Pooling pooling = Pooling::kLast;  // of /v1/embeddings
};

// What a request's `model` names: a served model, or a route (with the table that holds it,
// which a reload may replace while the request goes on).
struct Target {
  ModelService* model = nullptr;
  std::string lora;  // a LoRA adapter over `model` ("" none)
  const Route* route = nullptr;
  std::shared_ptr<const RouteTable> routes;
};

class ApiService : public HttpService {
 public:
  explicit ApiService(ServerConfig config);
  ~ApiService() override;

  // Opens the runtime (model, tokenizer, template, engine) from the configuration; `base`
  // carries what the configuration does not (repacking, pinning, load progress).
  Status load(const RuntimeOptions& base = {});
  // Replaces the routes (a reload: SIGHUP) with those of `fresh`, checked against the models
  // loaded; requests in flight keep the routes they started with. Models cannot change.
  Status reload_routes(const ServerConfig& fresh);
  // After the HTTP server has stopped: waits for the tasks still running, then stops the
  // engine and frees the model. The destructor does the same.
  void shutdown() override;
  bool ready() const { return ready_.load(); }
  // Shutdown has begun: chat template renders in progress stop at their next step.
  void begin_stop() override;
  // Graceful drain: every new request gets 503 with Retry-After (/ready too; /health and
  // /metrics still answer), while those in flight go on. in_flight() counts generations whose
  // reply is not done, and tasks.
  void begin_drain() override;
  // Where the HTTP server listens (before load): http tools never target it.
  void set_listening_address(std::string host, int port) { listening_ = ListenAddress{std::move(host), port}; }
  int64_t in_flight() override;
  // Whether `key` is one of the configured API keys (compared in constant time).
  bool accepts_key(const std::string& key) const override;
  // The first model's runtime (the others share its threads: tests hold its turns).
  Runtime& default_runtime() { return *default_model().runtime; }
  // Asks every generation in flight to stop (each ends with finish_reason "cancelled") and
  // ends the tool commands that tasks are running.
  void cancel_in_flight() override;

  Reply handle(const HttpRequest& request);
  // The checks that need no body (draining, route and method, API key, rate limit: as the
  // route table, route_table.h, says of the request's route), made when the headers have
  // arrived: a refusal is answered before any body is read. A request that passed them goes to
  // handle_admitted (which calls the handler of the route's Endpoint); handle does both.
  std::optional<Reply> admit(const HttpRequest& head) override;
  // The most body bytes this request may send: max_body_bytes, or jobs.max_file_bytes (and
  // room for the form around it) for a route whose body is an upload (POST /v1/files).
  int64_t body_limit(const HttpRequest& head) const override;
  // The CORS headers every response to a request from `origin` carries (none when CORS is off
  // or the origin is not allowed).
  std::vector<std::pair<std::string, std::string>> cors_headers(const std::string& origin) const override;
  Reply handle_admitted(const HttpRequest& request) override;
  ServerMetrics& metrics() override { return metrics_; }
  const ServerConfig& config() const override { return config_; }

 private:
  Reply route(const HttpRequest& request);
  // A chat or completions request: from HTTP (its body parsed once), or typed already (a job).
  Reply generate(const HttpRequest& request, GenerationKind kind);
  Reply generate(const GenerationCall& call);
  struct PreparedGeneration {
    ModelService* model = nullptr;
    Request request;                          // for the model's runtime
    std::optional<PreparedRequest> prepared;  // made ready by it (the prompt rendered)
    ResponseShape shape;
    GenerationParams params;
    std::string prompt_param;  // "messages" or "prompt": what errors about the prompt name
  };
  // The runtime request and the reply's shape for a model (`lora`: the adapter the request
  // names, when it names one); prepare_generation also makes it ready (throws ParamError
  // naming the field, or an EarlyReply).
  PreparedGeneration describe_generation(const GenerationCall& call, ModelService& model, const Target* lora = nullptr);
  void make_ready(PreparedGeneration& p);
  PreparedGeneration prepare_generation(const GenerationCall& call, ModelService& model, const Target* lora = nullptr);
  // One model answers (the response cache first, when `use_cache`); `route` labels its metrics.
  Reply generate_on(PreparedGeneration p, const std::string& route, bool use_cache);
  Reply cascade(const Route& route, const GenerationCall& call);
  // A rules or split route's model for this request (rules render the prompt with the
  // route's default model first, kept in `prepared` for when that model answers).
  RouteChoice choose(const Route& route, const GenerationCall& call, std::optional<PreparedGeneration>& prepared);
  Reply submit_generation(PreparedGeneration prepared, std::function<ReplyChunk(const StreamEvent&, size_t)> consume);
  // A cached generation's events, through `consume` as if the engine sent them.
  Reply replay(const CachedGeneration& cached, const PreparedGeneration& prepared,
               std::function<ReplyChunk(const StreamEvent&, size_t)> consume);
  std::string cache_salt(const std::string& api_key, const std::string& request_salt) const;
  // The body's `model`: a served model (the first one when absent), a route, or a 404 reply
  // naming what is served. `routes_ok`: whether a route may answer here.
  std::optional<Reply> resolve(const json& body, Target& target, bool routes_ok = false);
  std::optional<Reply> resolve(const std::string& model, Target& target, bool routes_ok = false);
  ModelService& model_named(const std::string& name);
  // The model a LoRA adapter of this name is loaded over, or null.
  ModelService* adapter_base(const std::string& name);
  // OK when no model, route or adapter has this name (a new adapter may take it).
  Status lora_name_free(const std::string& name);
  Reply load_lora_adapter(const std::string& body);
  std::vector<json> lora_objects();  // /v1/models entries of the adapters
  void lora_metrics(std::string& out);
  Reply unload_lora_adapter(const std::string& body);
  ModelService& default_model() { return *models_.front(); }
  std::string served_list() const;  // "'a', 'b' and the routes 'r'"
  Reply tokenize(const std::string& body);
  Reply embeddings(const std::string& body);
  Reply create_response(const HttpRequest& request);
  Reply stored_response(const std::string& method, const std::string& id, const std::string& api_key);
  Reply detokenize(const std::string& body);
  Reply feedback(const std::string& body);
  // `endpoint`: the synchronous route the job runs (chat completions, completions or tasks).
  Reply submit_job(Endpoint endpoint, const std::string& body, const std::string& api_key);
  Reply job(const std::string& method, const std::string& id, const std::string& api_key);
  Reply jobs(const std::string& target, const std::string& api_key);
  std::pair<int, std::string> run_job(const Job& job, const std::string& api_key, JobRun& run);
  Reply job_reply(const Job& job, const std::string& api_key);
  Reply files_route(const HttpRequest& request, const std::string& api_key);
  Reply upload_file(const HttpRequest& request, const std::string& api_key);
  Reply batches_route(const HttpRequest& request, const std::string& api_key);
  Reply create_batch(const std::string& body, const std::string& api_key);
  Reply models();
  Reply model(const std::string& id);
  Reply health();     // liveness (api_health.cpp)
  Reply readiness();  // GET /ready
  Reply web_page(const std::string& path);
  Reply metrics_text();
  void jobs_metrics(std::string& out);
  Reply run_task(const std::string& body, const std::string& api_key);

  ServerConfig config_;
  ServerMetrics metrics_;
  std::vector<std::unique_ptr<ModelService>> models_;  // the first answers requests that name none
  std::shared_ptr<ToolRegistry> tools_;
  std::optional<ListenAddress> listening_;
  std::shared_ptr<TaskPipeline> tasks_;  // on the first model
  mutable std::mutex routes_mutex_;
  std::shared_ptr<const RouteTable> routes_;  // replaced whole by reload_routes
  std::shared_ptr<const RouteTable> routes() const;
  FeedbackBook feedback_;
  std::unique_ptr<AsyncJobs> jobs_;   // null: jobs.data_dir not set
  std::unique_ptr<Batches> batches_;  // with jobs_
  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{false};
  RateLimiter rate_limiter_;
  ResponseStore responses_;                        // /v1/responses with store: true
  std::shared_ptr<ResponseCache> response_cache_;  // null when response_cache.enabled is false
  std::shared_ptr<void> track(const std::shared_ptr<StreamHandle>& handle);
  std::mutex flight_mutex_;
  std::vector<std::weak_ptr<StreamHandle>> in_flight_;  // for cancel_in_flight
  std::atomic<int64_t> generations_in_flight_{0};
  std::atomic<uint64_t> next_id_{1};
  // Tasks run on their own threads; the service waits for them before it goes away.
  std::mutex tasks_mutex_;
  std::condition_variable tasks_done_;
  int tasks_running_ = 0;
};

// A request body's `metadata` as stored: an object of at most 16 string values, as OpenAI's
// ("" : none); otherwise a 400 naming 'metadata' (thrown as bad() does).
std::string metadata_text(const json& body);

}  // namespace autoglm
