// What the server serves: the loaded models (a Runtime each), the routes over them (replaced
// whole on a reload) and the LoRA adapters loaded over the models; and what a request's
// `model` names among them. Every handler group reads it; none owns it.
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/runtime.h"
#include "server/api/reply.h"
#include "server/api/request_params.h"
#include "server/config/config.h"
#include "server/model_shelf.h"
#include "server/routing/routing.h"

namespace autoglm {

// A /v1/models entry: id, object, created, owned_by, and its kind ("model", "route", "lora").
json model_object(const std::string& id, const char* kind);

// What a request's `model` names: a served model, or a route (with the table that holds it,
// which a reload may replace while the request goes on).
struct Target {
  ModelService* model = nullptr;
  std::string lora;  // a LoRA adapter over `model` ("" none)
  const Route* route = nullptr;
  std::shared_ptr<const RouteTable> routes;
};

class ModelCatalog {
 public:
  // Every model served, in order (the first answers requests that name none), loaded or not;
  // the shelf loads and unloads them. Fixed once the server has started.
  std::vector<std::unique_ptr<ModelService>> models;
  std::unique_ptr<ModelShelf> shelf;

  // The model loaded and held for a request, or the reply that says why not (thrown by
  // answer_now: a 404 when autoload is off, a 503 naming a failed load's reason, a 503 with
  // Retry-After when too many requests wait on loads).
  ModelHold hold(ModelService& model);

  ModelService& default_model() { return *models.front(); }
  // The model of this name (routes are checked against the models: the first when none).
  // The model that answers to `name` (its name or an alias), or null.
  ModelService* find_model(const std::string& name) const;
  ModelService& model_named(const std::string& name);
  // The loaded model a LoRA adapter of this name is loaded over, or null.
  ModelService* adapter_base(const std::string& name);
  // OK when no model, route or adapter has this name (a new adapter may take it).
  Status lora_name_free(const std::string& name);
  std::vector<json> lora_objects();  // /v1/models entries of the adapters
  std::string served_list() const;   // "'a', 'b' and the routes 'r'"

  // Replaces the routes with those of `fresh`, checked against the models loaded; requests in
  // flight keep the routes they started with. Models cannot change.
  Status reload_routes(const ServerConfig& fresh);
  std::shared_ptr<const RouteTable> routes() const;

  // The body's `model`: a served model (the first one when absent), a route, or a
  // 404 reply naming what is served. `routes_ok`: whether a route may answer here.
  std::optional<Reply> resolve(const json& body, Target& target, bool routes_ok = false);
  std::optional<Reply> resolve(const std::string& name, Target& target, bool routes_ok = false);

 private:
  mutable std::mutex routes_mutex_;
  std::shared_ptr<const RouteTable> routes_;  // replaced whole by reload_routes
};

}  // namespace autoglm
