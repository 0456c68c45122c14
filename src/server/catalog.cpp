#include "server/catalog.h"

#include <ctime>

#include "server/config/routing_config.h"

namespace autoglm {

json model_object(const std::string& id, const char* kind) {
  return json{{"id", id},
              {"object", "model"},
              {"created", int64_t(std::time(nullptr))},
              {"owned_by", "open-autoglm"},
              {"kind", kind}};
}

Status ModelCatalog::reload_routes(const ServerConfig& fresh) {
  // models_dir is read at start: files added since are served after a restart (as llama-server's
  // router serves them), so only the configured models are compared.
  std::vector<std::string> names, configured, wanted;
  for (const auto& m : models) {
    names.push_back(m->name);
    if (!m->on_demand) configured.push_back(m->name);
  }
  for (const ServedModel& m : served_models(fresh))
    if (!m.on_demand) wanted.push_back(m.name);
  if (!models.empty() && wanted != configured)
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

std::shared_ptr<const RouteTable> ModelCatalog::routes() const {
  std::lock_guard<std::mutex> lock(routes_mutex_);
  return routes_;
}

ModelService* ModelCatalog::find_model(const std::string& name) const {
  for (const auto& m : models)
    if (m->answers_to(name)) return m.get();
  return nullptr;
}

ModelService& ModelCatalog::model_named(const std::string& name) {
  ModelService* m = find_model(name);
  return m ? *m : default_model();  // routes are checked against the models when they load
}

std::string ModelCatalog::served_list() const {
  std::string out;
  for (size_t i = 0; i < models.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == models.size() ? " and " : ", ") + "'" + models[i]->name + "'";
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

std::optional<Reply> ModelCatalog::resolve(const json& body, Target& target, bool routes_ok) {
  if (!body.contains("model") || body["model"].is_null()) return resolve(std::string(), target, routes_ok);
  if (!body["model"].is_string()) bad("model", "'model' must be a string");
  return resolve(body["model"].get<std::string>(), target, routes_ok);
}

std::optional<Reply> ModelCatalog::resolve(const std::string& name, Target& target, bool routes_ok) {
  target.model = &default_model();
  if (name.empty()) return std::nullopt;
  if (ModelService* m = find_model(name)) {
    target.model = m;
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

ModelHold ModelCatalog::hold(ModelService& model) {
  Result<ModelHold> held = shelf->hold(model);
  if (held) return std::move(held).value();
  const Status& st = held.status();
  if (st.code() == StatusCode::kNotFound) answer_now(error_reply(404, st.message(), "model"));
  Reply r = error_reply(503, st.message(), "", "service_unavailable");
  if (st.code() == StatusCode::kResourceExhausted) r.headers.emplace_back("Retry-After", "1");
  answer_now(std::move(r));
}

ModelService* ModelCatalog::adapter_base(const std::string& name) {
  ModelService* base = nullptr;
  shelf->for_each_loaded([&](ModelService& m) {
    for (const LoraInfo& a : m.runtime->loras())
      if (a.name == name && !base) base = &m;
  });
  return base;
}

Status ModelCatalog::lora_name_free(const std::string& name) {
  if (find_model(name)) return invalid_argument("'" + name + "' is the name of a model");
  if (const auto table = routes(); table && table->count(name))
    return invalid_argument("'" + name + "' is the name of a route");
  if (adapter_base(name)) return invalid_argument("an adapter named '" + name + "' is already loaded");
  return Status::ok();
}

std::vector<json> ModelCatalog::lora_objects() {
  std::vector<json> out;
  shelf->for_each_loaded([&](ModelService& m) {
    for (const LoraInfo& a : m.runtime->loras()) {
      json o = model_object(a.name, "lora");
      o["parent"] = m.name;
      o["root"] = a.path;
      o["lora"] = {{"scale", a.scale}, {"resident", a.resident}, {"in_use", a.in_use}};
      out.push_back(std::move(o));
    }
  });
  return out;
}

}  // namespace autoglm
