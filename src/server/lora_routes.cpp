// LoRA adapters served over the models: named in the configuration (lora_adapters) or loaded
// at run time (POST /v1/load_lora_adapter, /v1/unload_lora_adapter, as vLLM names them); a
// request names one as its `model`; /v1/models lists them with their base as parent.
#include "server/lora_routes.h"
#include "server/metrics/metrics.h"

namespace autoglm {

namespace {

Reply text_reply(const std::string& text) {
  Reply r;
  r.content_type = "text/plain; charset=utf-8";
  r.body = text;
  return r;
}

}  // namespace

void LoraRoutes::bind(HandlerTable& table) {
  table.bind(Endpoint::kLoadLoraAdapter,
             [this](const HttpRequest& req, const RouteLookup&) { return load_adapter(req.body); });
  table.bind(Endpoint::kUnloadLoraAdapter,
             [this](const HttpRequest& req, const RouteLookup&) { return unload_adapter(req.body); });
}

// POST /v1/load_lora_adapter {"lora_name", "lora_path", "model"?: its base (the first model),
// "scale"?: 1}: read now; a file that does not fit the base is a 400 naming the tensor.
Reply LoraRoutes::load_adapter(const std::string& body) {
  const json j = parse_body(body, config_.runtime.limits);
  const std::string name = string_field(j, "lora_name", true), path = string_field(j, "lora_path", true);
  const std::string base = string_field(j, "model", false);
  float scale = 1.0f;
  if (j.contains("scale") && !j["scale"].is_null()) {
    if (!j["scale"].is_number()) bad("scale", "'scale' must be a number");
    scale = j["scale"].get<float>();
  }
  if (Status free = catalog_.lora_name_free(name); !free.is_ok()) bad("lora_name", free.message());
  ModelService* model = &catalog_.default_model();
  if (!base.empty()) {
    model = nullptr;
    for (auto& m : catalog_.models)
      if (m->name == base) model = m.get();
    if (!model) return error_reply(404, "no model '" + base + "' to load the adapter over", "model");
  }
  const ModelHold held = catalog_.hold(*model);  // an adapter loaded here goes when its model unloads
  const Status st = held.runtime->load_lora(name, path, scale);
  if (st.code() == StatusCode::kResourceExhausted) return busy_reply(st.message());
  if (!st.is_ok()) bad("lora_path", st.message());
  return text_reply("Success: LoRA adapter '" + name + "' added successfully.");
}

// POST /v1/unload_lora_adapter {"lora_name"}: requests running with it finish with it.
Reply LoraRoutes::unload_adapter(const std::string& body) {
  const json j = parse_body(body, config_.runtime.limits);
  const std::string name = string_field(j, "lora_name", true);
  ModelService* model = catalog_.adapter_base(name);
  if (!model) return error_reply(404, "no LoRA adapter '" + name + "'", "lora_name");
  const ModelHold held = catalog_.hold(*model);
  if (Status st = held.runtime->unload_lora(name); !st.is_ok()) return error_reply(404, st.message(), "lora_name");
  return text_reply("Success: LoRA adapter '" + name + "' removed successfully.");
}

// The adapters in use, in the shape the Kubernetes Gateway API Inference Extension reads
// (vLLM's lora_requests_info): labels name the bound and the adapters of running and waiting
// requests, the value is when they last changed.
void LoraRoutes::metrics(std::string& out) {
  metric_header(out, "autoglm_lora_requests_info", "gauge",
                "LoRA adapters of running and waiting requests (labels); the value: when they last changed.");
  catalog_.shelf->for_each_loaded([&](ModelService& m) {
    const RuntimeStats a = m.runtime->stats();
    out += "autoglm_lora_requests_info{" + metric_label("model", m.name) + "," +
           metric_label("max_lora", std::to_string(m.config->runtime.max_loras)) + "," +
           metric_label("running_lora_adapters", a.lora_running) + "," +
           metric_label("waiting_lora_adapters", a.lora_waiting) + "} " + std::to_string(a.lora_changed_at) + "\n";
  });
  metric_header(out, "autoglm_lora_adapters_loaded", "gauge", "LoRA adapters loaded (resident) over each model.");
  catalog_.shelf->for_each_loaded([&](ModelService& m) {
    int64_t resident = 0;
    for (const LoraInfo& a : m.runtime->loras()) resident += a.resident;
    out += "autoglm_lora_adapters_loaded{" + metric_label("model", m.name) + "} " + std::to_string(resident) + "\n";
  });
}

}  // namespace autoglm
