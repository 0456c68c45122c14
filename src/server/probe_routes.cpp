// GET /health (liveness), GET /ready (readiness), GET /metrics and the web UI's files.
#include "server/probe_routes.h"

#include "server/web/web_assets.h"

namespace autoglm {

void ProbeRoutes::bind(HandlerTable& table) {
  table.bind(Endpoint::kHealth, [this](const HttpRequest&, const RouteLookup&) { return health(); });
  table.bind(Endpoint::kReady, [this](const HttpRequest&, const RouteLookup&) { return readiness(); });
  table.bind(Endpoint::kMetrics, [this](const HttpRequest&, const RouteLookup&) { return metrics_text(); });
  const RouteHandler page = [this](const HttpRequest& req, const RouteLookup&) {
    return web_page(path_of(req.target));
  };
  for (Endpoint e : {Endpoint::kWebIndex, Endpoint::kDashboard, Endpoint::kWebAsset}) table.bind(e, page);
}

// Liveness: the process answers and every engine's thread is in its loop. While the model
// loads there is no engine yet (503, as llama-server answers: a startup probe waits on it; the
// models are read only once loaded); while draining the engines still run, so the server is
// alive (200) but not ready.
Reply ProbeRoutes::health() {
  if (!ready_) return error_reply(503, "the model is loading", "", "service_unavailable");
  json engines = json::array();
  bool alive = true;
  catalog_.shelf->for_each_loaded([&](ModelService& m) {  // an unloaded model has no engine to check
    const RuntimeStats stats = m.runtime->stats();
    alive = alive && stats.loop_alive;
    engines.push_back({{"model", m.name}, {"alive", stats.loop_alive}, {"step_running_s", stats.step_running_seconds}});
  });
  if (!alive) return error_reply(503, "an engine thread has stopped", "", "service_unavailable");
  Reply r;
  r.body = json{{"status", draining_ ? "draining" : "ok"}, {"engines", engines}}.dump();
  return r;
}

// Readiness: loaded and not draining; a 503 carries Retry-After so clients go elsewhere.
Reply ProbeRoutes::readiness() {
  if (ready_ && !draining_) {
    Reply r;
    r.body = R"({"status":"ready"})";
    return r;
  }
  Reply r =
      error_reply(503, draining_ ? "the server is shutting down" : "the model is loading", "", "service_unavailable");
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

Reply ProbeRoutes::metrics_text() {
  Reply r;
  r.content_type = "text/plain; version=0.0.4";
  std::vector<EngineView> engines;
  catalog_.shelf->for_each_loaded([&](ModelService& m) {
    const ModelInfo info = m.runtime->info();
    engines.push_back({m.name, m.runtime->stats(), info.device, info.device_weight_bytes, info.kv_bytes});
  });
  r.body = metrics_.render(engines, sources_.tools ? sources_.tools() : nullptr);
  if (sources_.more) sources_.more(r.body);
  return r;
}

// The web UI's pages and files (server/web/web_assets.h), unless web_ui is off.
Reply ProbeRoutes::web_page(const std::string& path) {
  const WebAsset* asset = config_.web_ui ? web_asset_for(path) : nullptr;
  if (!asset) return error_reply(404, config_.web_ui ? "no file " + path : "the web UI is off (web_ui: false)");
  Reply r;
  r.content_type = std::string(asset->content_type);
  r.body = std::string(asset->bytes);
  // The pages load only their own scripts and talk only to this server.
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

}  // namespace autoglm
