// Prometheus text exposition (format 0.0.4) for the server: histograms, counters
// and gauges in the autoglm_ namespace. Observations come from request events,
// off the engine's hot path.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "autoglm/runtime.h"
#include "tasks/tools.h"

namespace autoglm {

// name="value", the value escaped as the exposition format wants (backslash, quote, newline):
// every label whose value a client or a configuration chooses goes through it.
std::string metric_label(const std::string& name, const std::string& value);
// One metric's "# HELP"/"# TYPE" lines, and one sample line.
void metric_header(std::string& out, const std::string& name, const char* type, const std::string& help);
void metric_sample(std::string& out, const std::string& name, double v);

// Counts of observations by upper bound; rendered as one series of a histogram family.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // The _bucket, _sum and _count samples under `labels` ("model=\"a\"", or empty).
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// The request-level series of one model reached one way (directly, or through a route's
// arm): what an A/B comparison reads, per {model, route}.
struct RequestMetrics {
  RequestMetrics();
  Histogram time_to_first_token, inter_token_latency, e2e_latency, queue_time, prefill_time;
  std::atomic<uint64_t> requests{0}, errors{0}, prompt_tokens{0}, completion_tokens{0};
  // Feedback on this series' responses (POST /v1/feedback).
  std::atomic<uint64_t> thumbs_up{0}, thumbs_down{0}, scores{0};
  std::atomic<int64_t> score_milli_sum{0};  // scores in thousandths
};

// One engine's counters and gauges, labelled by its model.
struct EngineView {
  std::string model;
  RuntimeStats stats;               // op_seconds exported when profiling is on
  std::string device;               // where it runs: "cpu", "cuda:N"
  int64_t device_weight_bytes = 0;  // the weights' copy on a GPU (0 on the cpu: the mapped file)
  int64_t kv_bytes = 0;             // its KV pool
};

class ServerMetrics {
 public:
  // The series of {model, route} (route empty: the model asked for by name), made on first use.
  RequestMetrics& requests(const std::string& model, const std::string& route = "");
  void count_status(int status);
  void count_task(const std::string& status);
  // A route's decision: which model, and the kind of reason ("rule", "default", "arm",
  // "override", "kept", "escalated").
  void count_route(const std::string& route, const std::string& model, const std::string& decision);

  // A model's load ("loaded", "load_failed") or unload ("unloaded:<reason>"), and its seconds.
  void count_model_event(const std::string& model, const std::string& event, double seconds);

  // Everything: the request series, each engine's counters and gauges, tools, tasks, statuses.
  std::string render(const std::vector<EngineView>& engines, const ToolStats* tools = nullptr) const;

 private:
  void render_model_events(std::string& out) const;

  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<RequestMetrics>> series_;
  std::map<int, uint64_t> by_status_;
  std::map<std::string, uint64_t> tasks_by_status_;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> route_decisions_;
  struct EventTotals {
    uint64_t count = 0;
    double seconds = 0;
  };
  std::map<std::pair<std::string, std::string>, EventTotals> model_events_;  // {model, event}
};

}  // namespace autoglm
