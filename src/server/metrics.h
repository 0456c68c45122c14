// Prometheus text exposition (format 0.0.4) for the server: histograms, counters
// and gauges in the autoglm_ namespace. Observations come from request events,
// off the engine's hot path.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tasks/tools.h"

namespace autoglm {

// One metric's "# HELP"/"# TYPE" lines, and one sample line.
void metric_header(std::string& out, const std::string& name, const char* type, const std::string& help);
void metric_sample(std::string& out, const std::string& name, double v);

class Histogram {
 public:
  Histogram(std::string name, std::string help, std::vector<double> bounds);
  void observe(double v);
  void render(std::string& out) const;

 private:
  std::string name_, help_;
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  Histogram time_to_first_token, inter_token_latency, e2e_latency, queue_time, prefill_time;
  void count_status(int status);

  // Everything, with the engine's counters and gauges.
  // profile: the engine's per-op times, exported when profiling is on.
  std::string render(const EngineStats& engine, const OpProfile* profile = nullptr,
                     const ToolStats* tools = nullptr) const;
  void count_task(const std::string& status);

 private:
  mutable std::mutex mutex_;
  std::map<int, uint64_t> by_status_;
  std::map<std::string, uint64_t> tasks_by_status_;
};

}  // namespace autoglm
