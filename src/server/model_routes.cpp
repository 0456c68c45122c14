#include "server/model_routes.h"

#include <unistd.h>

#include <fstream>

#include "server/api/embeddings_route.h"
#include "server/metrics/metrics.h"

namespace autoglm {
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

void ModelRoutes::bind(HandlerTable& table) {
  table.bind(Endpoint::kModels, [this](const HttpRequest&, const RouteLookup&) { return models(); });
  table.bind(Endpoint::kModel, [this](const HttpRequest&, const RouteLookup& found) {
    return model(std::string(found.params["model"]));
  });
  table.bind(Endpoint::kLoadModel, [this](const HttpRequest& req, const RouteLookup&) { return load_model(req.body); });
  table.bind(Endpoint::kUnloadModel,
             [this](const HttpRequest& req, const RouteLookup&) { return unload_model(req.body); });
  table.bind(Endpoint::kTokenize, [this](const HttpRequest& req, const RouteLookup&) { return tokenize(req.body); });
  table.bind(Endpoint::kDetokenize,
             [this](const HttpRequest& req, const RouteLookup&) { return detokenize(req.body); });
  table.bind(Endpoint::kEmbeddings,
             [this](const HttpRequest& req, const RouteLookup&) { return embeddings(req.body); });
}

// A model's /v1/models entry: with its status (llama-server's router's shape: {"value": "loaded",
// ...}, and the reason of a failed load).
json ModelRoutes::served_object(const ModelService& m, const std::string& id) {
  json o = model_object(id, "model");
  o["status"] = catalog_.shelf->status_of(m);
  return o;
}

// POST /models/load {"model"}: starts loading it (requests that name it wait for the load);
// {"success": true} once started, or at once when it is loaded.
Reply ModelRoutes::load_model(const std::string& body) {
  return change_model(body, &ModelShelf::request_load);
}

// POST /models/unload {"model"}: unloads it once its requests in flight are done (those that
// come meanwhile load it again, with autoload).
Reply ModelRoutes::unload_model(const std::string& body) {
  return change_model(body, &ModelShelf::request_unload);
}

// The body's model asked of the shelf: 404 for a name not served, 400 for what the shelf refuses.
Reply ModelRoutes::change_model(const std::string& body, Status (ModelShelf::*ask)(ModelService&)) {
  const json j = parse_body(body, config_.runtime.limits);
  const std::string name = string_field(j, "model", true);
  ModelService* m = catalog_.find_model(name);
  if (!m) return error_reply(404, "no model '" + name + "'; this server serves " + catalog_.served_list(), "model");
  if (Status st = ((*catalog_.shelf).*ask)(*m); !st.is_ok()) return error_reply(400, st.message(), "model");
  return json_reply(200, json{{"success", true}, {"status", catalog_.shelf->status_of(*m)}});
}

// GET /v1/models/{id}: a model or a route, or a 404 naming those served.
Reply ModelRoutes::model(const std::string& id) {
  Reply r;
  if (const ModelService* m = catalog_.find_model(id)) {
    r.body = served_object(*m, id).dump();
    return r;
  }
  const auto table = catalog_.routes();
  if (auto it = table->find(id); it != table->end()) {
    r.body = route_object(it->second).dump();
    return r;
  }
  for (const json& adapter : catalog_.lora_objects())
    if (adapter["id"] == id) {
      r.body = adapter.dump(-1, ' ', false, json::error_handler_t::replace);
      return r;
    }
  return error_reply(404, "no model '" + id + "'; this server serves " + catalog_.served_list(), "model");
}

// GET /v1/models: the models, then the routes (kind "route", with the models they pick).
Reply ModelRoutes::models() {
  json data = json::array();
  for (const auto& m : catalog_.models) {
    data.push_back(served_object(*m, m->name));
    for (const std::string& alias : m->aliases) data.push_back(served_object(*m, alias));  // as vLLM lists them
  }
  for (const auto& [name, route] : *catalog_.routes()) data.push_back(route_object(route));
  for (const json& adapter : catalog_.lora_objects()) data.push_back(adapter);
  Reply r;
  r.body = json{{"object", "list"}, {"data", data}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

void ModelRoutes::metrics(std::string& out) const {
  metric_header(out, "autoglm_model_status", "gauge",
                "Each served model's status: 1 on its current one (loaded, loading, unloaded, sleeping, failed).");
  for (const auto& m : catalog_.models) {
    const ModelStatus now = catalog_.shelf->status(*m);
    for (ModelStatus s : {ModelStatus::kLoaded, ModelStatus::kLoading, ModelStatus::kUnloaded, ModelStatus::kSleeping,
                          ModelStatus::kFailed})
      out += "autoglm_model_status{" + metric_label("model", m->name) + "," +
             metric_label("status", model_status_name(s)) + "} " + (s == now ? "1" : "0") + "\n";
  }
  int64_t pages = 0, resident = 0;
  std::ifstream statm("/proc/self/statm");
  if (statm >> pages >> resident) {
    metric_header(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    metric_sample(out, "process_resident_memory_bytes", double(resident) * double(sysconf(_SC_PAGESIZE)));
  }
}

Reply ModelRoutes::tokenize(const std::string& body) {
  const json j = parse_body(body, config_.runtime.limits);
  if (!j.contains("content") || !j["content"].is_string()) bad("content", "'content' must be a string");
  const bool add_special = bool_param(j, "add_special", true);
  const bool with_pieces = bool_param(j, "with_pieces", false);
  Target target;
  if (auto other = catalog_.resolve(j, target)) return *other;
  const ModelHold held = catalog_.hold(*target.model);
  const Runtime& tokenizer = *held.runtime;
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

Reply ModelRoutes::detokenize(const std::string& body) {
  const json j = parse_body(body, config_.runtime.limits);
  if (!j.contains("tokens") || !j["tokens"].is_array()) bad("tokens", "'tokens' must be an array of token ids");
  Target target;
  if (auto other = catalog_.resolve(j, target)) return *other;
  const ModelHold held = catalog_.hold(*target.model);
  const Runtime& tokenizer = *held.runtime;
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

Reply ModelRoutes::embeddings(const std::string& body) {
  const json j = parse_body(body, config_.runtime.limits);
  Target target;
  if (auto other = catalog_.resolve(j, target)) return *other;
  ModelService& m = *target.model;
  const ModelHold held = catalog_.hold(m);
  return embeddings_reply(j, {*held.runtime, m.info.n_embd, m.pooling, m.name});
}

}  // namespace autoglm
