// What a load balancer, Kubernetes, Prometheus and a browser ask without a model call:
// GET /health (liveness), GET /ready (readiness), GET /metrics, and the web UI's files.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "server/catalog.h"
#include "server/handler_table.h"
#include "server/metrics/metrics.h"

namespace autoglm {

// What /metrics adds to the request series and the engines' counters: the tools' counts (null:
// none yet), and the other groups' metrics (response cache, jobs, LoRA) appended to the text.
struct MetricSources {
  std::function<const ToolStats*()> tools;
  std::function<void(std::string&)> more;
};

class ProbeRoutes {
 public:
  ProbeRoutes(const ServerConfig& config, ServerMetrics& metrics, ModelCatalog& catalog, const std::atomic<bool>& ready,
              const std::atomic<bool>& draining, MetricSources sources)
      : config_(config),
        metrics_(metrics),
        catalog_(catalog),
        ready_(ready),
        draining_(draining),
        sources_(std::move(sources)) {}
  void bind(HandlerTable& table);

 private:
  Reply health();
  Reply readiness();
  Reply metrics_text();
  Reply web_page(const std::string& path);

  const ServerConfig& config_;
  ServerMetrics& metrics_;
  ModelCatalog& catalog_;
  const std::atomic<bool>& ready_;
  const std::atomic<bool>& draining_;
  MetricSources sources_;
};

}  // namespace autoglm
