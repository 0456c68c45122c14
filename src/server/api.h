// The HTTP API service (ApiService): admission, dispatch to the handler groups, lifecycle.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/runtime.h"
#include "server/api/reply.h"
#include "server/catalog.h"
#include "server/config/config.h"
#include "server/generation_routes.h"
#include "server/handler_table.h"
#include "server/http/http_service.h"
#include "server/http/rate_limiter.h"
#include "server/in_flight.h"
#include "server/job_routes.h"
#include "server/lora_routes.h"
#include "server/metrics/metrics.h"
#include "server/model_routes.h"
#include "server/probe_routes.h"
#include "server/task_routes.h"

namespace autoglm {

// The HTTP API as one service: admission by the route table (route_table.h: who may call a
// route, its body limit), dispatch to the handler each group bound for its endpoint
// (handler_table.h), and the lifecycle (load, drain, stop). The handlers live in their groups:
// generation (chat, completions, Responses, feedback), tasks, jobs and batches, LoRA, models
// (models, tokenize, detokenize, embeddings), probes (health, ready, metrics, web UI), over the
// catalogue of what is served. Transport-free, so tests can call it directly.
class ApiService : public HttpService {
 public:
  explicit ApiService(ServerConfig config);
  ~ApiService() override;

  // Opens the runtimes (model, tokenizer, template, engine) from the configuration; `base`
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
  Runtime& default_runtime();
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
  std::optional<Reply> check_admission(const HttpRequest& head);
  Reply handle_checked(const HttpRequest& request);
  Status load_models(const RuntimeOptions& base);
  Result<std::unique_ptr<Runtime>> open_model(ModelService& m, const RuntimeOptions& base, double kv_share,
                                              const Runtime* other);

  ServerConfig config_;
  ServerMetrics metrics_;
  ModelCatalog catalog_;
  InFlight in_flight_;
  std::optional<ListenAddress> listening_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{false};
  RateLimiter rate_limiter_;
  // The handler groups, each binding its endpoints into handlers_.
  GenerationRoutes generation_;
  TaskRoutes tasks_;
  JobRoutes jobs_;
  LoraRoutes loras_;
  ModelRoutes model_routes_;
  ProbeRoutes probes_;
  HandlerTable handlers_;
};

}  // namespace autoglm
