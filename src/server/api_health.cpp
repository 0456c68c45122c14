// GET /health (liveness) and GET /ready (readiness): what a load balancer or Kubernetes asks.
#include "server/api.h"

namespace autoglm {

// Liveness: the process answers and every engine's thread is in its loop. While the model
// loads there is no engine yet (503, as llama-server answers: a startup probe waits on it; the
// models are read only once loaded); while draining the engines still run, so the server is
// alive (200) but not ready.
Reply ApiService::health() {
  if (!ready()) return error_reply(503, "the model is loading", "", "service_unavailable");
  json engines = json::array();
  bool alive = true;
  for (const auto& m : models_) {
    const RuntimeStats stats = m->runtime->stats();
    alive = alive && stats.loop_alive;
    engines.push_back(
        {{"model", m->name}, {"alive", stats.loop_alive}, {"step_running_s", stats.step_running_seconds}});
  }
  if (!alive) return error_reply(503, "an engine thread has stopped", "", "service_unavailable");
  Reply r;
  r.body = json{{"status", draining_ ? "draining" : "ok"}, {"engines", engines}}.dump();
  return r;
}

// Readiness: loaded and not draining; a 503 carries Retry-After so clients go elsewhere.
Reply ApiService::readiness() {
  if (ready() && !draining_) {
    Reply r;
    r.body = R"({"status":"ready"})";
    return r;
  }
  Reply r =
      error_reply(503, draining_ ? "the server is shutting down" : "the model is loading", "", "service_unavailable");
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

}  // namespace autoglm
