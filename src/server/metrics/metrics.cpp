#include "server/metrics/metrics.h"

#include <charconv>
#include <cmath>

namespace autoglm {
namespace {

// The shortest text that reads back as the same double ("0.005", not "0.0050000000000000001").
std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;
  return std::string(buf, end);
}

const std::vector<double> kLatencyBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                            0.5,   1,      2.5,   5,    10,    30,   60,  120};

}  // namespace

void metric_header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void metric_sample(std::string& out, const std::string& name, double v) {
  out += name + " " + number(v) + "\n";
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string sep = labels.empty() ? "" : ",";
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{" + labels + sep + "le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  cumulative += counts_.back();
  out += name + "_bucket{" + labels + sep + "le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  out += name + "_sum" + braces + " " + number(sum_) + "\n";
  out += name + "_count" + braces + " " + std::to_string(count_) + "\n";
}

RequestMetrics::RequestMetrics()
    : time_to_first_token(kLatencyBounds),
      inter_token_latency(kLatencyBounds),
      e2e_latency(kLatencyBounds),
      queue_time(kLatencyBounds),
      prefill_time(kLatencyBounds) {}

RequestMetrics& ServerMetrics::requests(const std::string& model, const std::string& route) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& series = series_[{model, route}];
  if (!series) series = std::make_unique<RequestMetrics>();
  return *series;
}

void ServerMetrics::count_status(int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++by_status_[status];
}

void ServerMetrics::count_task(const std::string& status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++tasks_by_status_[status];
}

void ServerMetrics::count_route(const std::string& route, const std::string& model, const std::string& decision) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++route_decisions_[{route, model, decision}];
}

void ServerMetrics::count_model_event(const std::string& model, const std::string& event, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  EventTotals& t = model_events_[{model, event}];
  ++t.count;
  t.seconds += seconds;
}

std::string metric_label(const std::string& name, const std::string& value) {
  std::string v;
  for (char c : value) {
    if (c == '\\' || c == '"') v += '\\';
    if (c == '\n') {
      v += "\\n";
      continue;
    }
    v += c;
  }
  return name + "=\"" + v + "\"";
}

namespace {

void sample(std::string& out, const std::string& name, const std::string& labels, double v) {
  out += name + "{" + labels + "} " + number(v) + "\n";
}

void render_request_series(
    std::string& out, const std::map<std::pair<std::string, std::string>, std::unique_ptr<RequestMetrics>>& series) {
  struct Family {
    const char* name;
    const char* help;
    Histogram RequestMetrics::*histogram;
  };
  const Family families[] = {
      {"autoglm_time_to_first_token_seconds", "Time from request arrival to its first token.",
       &RequestMetrics::time_to_first_token},
      {"autoglm_inter_token_latency_seconds", "Time between consecutive streamed tokens.",
       &RequestMetrics::inter_token_latency},
      {"autoglm_e2e_request_latency_seconds", "Time from arrival to the last token.", &RequestMetrics::e2e_latency},
      {"autoglm_queue_time_seconds", "Time a request waited before its first scheduled step.",
       &RequestMetrics::queue_time},
      {"autoglm_prefill_time_seconds", "Time from the first scheduled step to the first token.",
       &RequestMetrics::prefill_time},
  };
  auto labels_of = [](const std::pair<std::string, std::string>& key) {
    return metric_label("model", key.first) + "," + metric_label("route", key.second);
  };
  for (const Family& f : families) {
    metric_header(out, f.name, "histogram", f.help);
    for (const auto& [key, m] : series) ((*m).*f.histogram).render(out, f.name, labels_of(key));
  }
  metric_header(out, "autoglm_served_requests_total", "counter",
                "Generation requests answered, by model, route (empty: asked for by name) and outcome.");
  for (const auto& [key, m] : series) {
    sample(out, "autoglm_served_requests_total", labels_of(key) + ",outcome=\"ok\"",
           double(m->requests.load() - m->errors.load()));
    sample(out, "autoglm_served_requests_total", labels_of(key) + ",outcome=\"error\"", double(m->errors.load()));
  }
  metric_header(out, "autoglm_served_tokens_total", "counter", "Prompt and completion tokens by model and route.");
  for (const auto& [key, m] : series) {
    sample(out, "autoglm_served_tokens_total", labels_of(key) + ",kind=\"prompt\"", double(m->prompt_tokens.load()));
    sample(out, "autoglm_served_tokens_total", labels_of(key) + ",kind=\"completion\"",
           double(m->completion_tokens.load()));
  }
  metric_header(out, "autoglm_feedback_total", "counter", "Feedback (POST /v1/feedback) by model, route and rating.");
  for (const auto& [key, m] : series) {
    sample(out, "autoglm_feedback_total", labels_of(key) + ",rating=\"up\"", double(m->thumbs_up.load()));
    sample(out, "autoglm_feedback_total", labels_of(key) + ",rating=\"down\"", double(m->thumbs_down.load()));
    sample(out, "autoglm_feedback_total", labels_of(key) + ",rating=\"score\"", double(m->scores.load()));
  }
  metric_header(out, "autoglm_feedback_score_total", "counter", "The sum of feedback scores by model and route.");
  for (const auto& [key, m] : series)
    sample(out, "autoglm_feedback_score_total", labels_of(key), double(m->score_milli_sum.load()) / 1000.0);
}

void render_device_memory(std::string& out, const std::vector<EngineView>& engines) {
  metric_header(out, "autoglm_device_memory_bytes", "gauge",
                "Memory a model holds on its device: the KV pool, and on a GPU the weights' copy.");
  for (const EngineView& v : engines) {
    const std::string labels = metric_label("model", v.model) + "," + metric_label("device", v.device);
    sample(out, "autoglm_device_memory_bytes", labels + ",use=\"kv\"", double(v.kv_bytes));
    if (v.device != "cpu")
      sample(out, "autoglm_device_memory_bytes", labels + ",use=\"weights\"", double(v.device_weight_bytes));
  }
}

void render_prefill_chunks(std::string& out, const std::vector<EngineView>& engines) {
  metric_header(out, "autoglm_scheduler_prefill_chunk_tokens", "histogram", "Prefill chunk sizes the scheduler chose.");
  for (const EngineView& v : engines) {
    const RuntimeStats& e = v.stats;
    const std::string m = metric_label("model", v.model);
    int64_t cumulative = 0;
    const int buckets = int(e.prefill_chunks.size());
    for (int b = 0; b < buckets; ++b) {
      cumulative += e.prefill_chunks[size_t(b)];
      const std::string le = b + 1 < buckets ? std::to_string(8 << b) : "+Inf";
      out += "autoglm_scheduler_prefill_chunk_tokens_bucket{" + m + ",le=\"" + le + "\"} " +
             std::to_string(cumulative) + "\n";
    }
    sample(out, "autoglm_scheduler_prefill_chunk_tokens_sum", m, double(e.prefill_chunk_tokens));
    sample(out, "autoglm_scheduler_prefill_chunk_tokens_count", m, double(cumulative));
  }
}

void render_acceptance(std::string& out, const std::vector<EngineView>& engines) {
  metric_header(out, "autoglm_spec_acceptance_rate", "histogram", "Acceptance rate of finished requests that drafted.");
  for (const EngineView& v : engines) {
    const RuntimeStats& e = v.stats;
    const std::string m = metric_label("model", v.model);
    int64_t drafted_requests = 0;
    const int buckets = int(e.spec_acceptance.size());
    for (int b = 0; b < buckets; ++b) {
      drafted_requests += e.spec_acceptance[size_t(b)];
      const std::string le = b + 1 < buckets ? "0." + std::to_string(b + 1) : "+Inf";
      out +=
          "autoglm_spec_acceptance_rate_bucket{" + m + ",le=\"" + le + "\"} " + std::to_string(drafted_requests) + "\n";
    }
    sample(out, "autoglm_spec_acceptance_rate_sum", m, e.spec_acceptance_sum);
    sample(out, "autoglm_spec_acceptance_rate_count", m, double(drafted_requests));
  }
}

// Forward time by op, when any engine profiles (profile: true).
void render_op_profile(std::string& out, const std::vector<EngineView>& engines) {
  bool profiled = false;
  for (const EngineView& v : engines) profiled = profiled || !v.stats.op_seconds.empty();
  if (!profiled) return;
  metric_header(out, "autoglm_op_seconds_total", "counter", "Forward-pass time by op (profile: true).");
  for (const EngineView& v : engines)
    for (const auto& [op, seconds] : v.stats.op_seconds)
      sample(out, "autoglm_op_seconds_total", metric_label("model", v.model) + "," + metric_label("op", op), seconds);
  metric_header(out, "autoglm_op_profiled_tokens_total", "counter", "Tokens through the profiled forward passes.");
  for (const EngineView& v : engines)
    if (!v.stats.op_seconds.empty())
      sample(out, "autoglm_op_profiled_tokens_total", metric_label("model", v.model), double(v.stats.profiled_tokens));
}

// One sample per engine, labelled by its model.
template <class ValueOf>
void per_engine(std::string& out, const std::vector<EngineView>& engines, const char* name, const char* type,
                const char* help, ValueOf value_of) {
  metric_header(out, name, type, help);
  for (const EngineView& v : engines) sample(out, name, metric_label("model", v.model), double(value_of(v.stats)));
}

// The prefix cache's tiers below the pool (kv_cache.ram_mib, kv_cache.disk_dir).
void render_kv_tiers(std::string& out, const std::vector<EngineView>& engines) {
  auto by_tier = [&](const char* name, const char* type, const char* help, auto ram, auto disk) {
    metric_header(out, name, type, help);
    for (const EngineView& v : engines) {
      sample(out, name, metric_label("model", v.model) + ",tier=\"ram\"", double(ram(v.stats)));
      sample(out, name, metric_label("model", v.model) + ",tier=\"disk\"", double(disk(v.stats)));
    }
  };
  by_tier(
      "autoglm_kv_tier_hits_total", "counter", "Prefix blocks the pool missed and a tier held (copied back).",
      [](const RuntimeStats& e) { return e.kv_tier_ram_hits; },
      [](const RuntimeStats& e) { return e.kv_tier_disk_hits; });
  by_tier(
      "autoglm_kv_tier_bytes", "gauge", "Bytes of prefix blocks each tier holds.",
      [](const RuntimeStats& e) { return e.kv_tier_ram_bytes; },
      [](const RuntimeStats& e) { return e.kv_tier_disk_bytes; });
  auto family = [&](const char* name, const char* type, const char* help, auto value_of) {
    per_engine(out, engines, name, type, help, value_of);
  };
  family("autoglm_kv_tier_misses_total", "counter", "Prefix blocks the pool missed and no tier held.",
         [](const RuntimeStats& e) { return e.kv_tier_misses; });
  family("autoglm_kv_tier_bytes_in_total", "counter", "Bytes of evicted blocks copied into the tiers.",
         [](const RuntimeStats& e) { return e.kv_tier_bytes_in; });
  family("autoglm_kv_tier_bytes_out_total", "counter", "Bytes copied back from the tiers into the pool.",
         [](const RuntimeStats& e) { return e.kv_tier_bytes_out; });
  family("autoglm_kv_tier_copy_seconds_total", "counter", "Time spent copying into and out of the tiers.",
         [](const RuntimeStats& e) { return e.kv_tier_copy_seconds; });
  family("autoglm_kv_tier_disk_rejected_total", "counter", "Disk tier files skipped as corrupt or foreign.",
         [](const RuntimeStats& e) { return e.kv_tier_disk_rejected; });
}

void render_engine(std::string& out, const std::vector<EngineView>& engines) {
  auto family = [&](const char* name, const char* type, const char* help, auto value_of) {
    per_engine(out, engines, name, type, help, value_of);
  };
  family("autoglm_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
         [](const RuntimeStats& e) { return e.prompt_tokens; });
  family("autoglm_generation_tokens_total", "counter", "Generated tokens.",
         [](const RuntimeStats& e) { return e.generated_tokens; });
  family("autoglm_prefix_cache_hit_tokens_total", "counter", "Prompt tokens whose KV came from the prefix cache.",
         [](const RuntimeStats& e) { return e.prefix_hit_tokens; });
  family("autoglm_prefix_cache_queried_tokens_total", "counter", "Prompt tokens looked up in the prefix cache.",
         [](const RuntimeStats& e) { return e.prefix_queried_tokens; });
  family("autoglm_preemptions_total", "counter", "Sequences preempted to free KV blocks.",
         [](const RuntimeStats& e) { return e.preemptions; });
  family("autoglm_engine_steps_total", "counter", "Batches run by the engine.",
         [](const RuntimeStats& e) { return e.steps; });
  family("autoglm_requests_running", "gauge", "Sequences in the running set.",
         [](const RuntimeStats& e) { return e.running; });
  family("autoglm_requests_waiting", "gauge", "Requests waiting to be admitted.",
         [](const RuntimeStats& e) { return e.waiting; });
  family("autoglm_kv_blocks_used", "gauge", "KV cache blocks referenced by sequences.",
         [](const RuntimeStats& e) { return e.kv_blocks_used; });
  family("autoglm_kv_blocks_capacity", "gauge", "KV cache blocks in the pool.",
         [](const RuntimeStats& e) { return e.kv_blocks_total; });
  // The Model Server Protocol's KVCacheUtilization (vLLM's kv_cache_usage_perc): 0 to 1.
  family("autoglm_kv_cache_usage_perc", "gauge", "Fraction of KV cache blocks referenced by sequences (0 to 1).",
         [](const RuntimeStats& e) {
           const int64_t total = e.kv_blocks_total;
           return total > 0 ? double(e.kv_blocks_used) / double(total) : 0.0;
         });
  render_device_memory(out, engines);
  render_kv_tiers(out, engines);
  family("autoglm_scheduler_step_target_seconds", "gauge", "The last step's time target (0: planned by tokens only).",
         [](const RuntimeStats& e) { return e.step_target_seconds; });
  render_prefill_chunks(out, engines);
  family("autoglm_spec_drafted_tokens_total", "counter", "Tokens drafted for speculative decoding.",
         [](const RuntimeStats& e) { return e.spec_drafted; });
  family("autoglm_spec_accepted_tokens_total", "counter", "Drafted tokens the target accepted.",
         [](const RuntimeStats& e) { return e.spec_accepted; });
  family("autoglm_spec_target_passes_total", "counter",
         "Target passes that verified drafts (one per sequence and step).",
         [](const RuntimeStats& e) { return e.spec_passes; });
  render_acceptance(out, engines);
  metric_header(out, "autoglm_requests_total", "counter", "Finished generation requests by finish reason.");
  // Every reason the engine ends a request with (tool_calls is decided above it).
  for (const EngineView& v : engines)
    for (FinishReason r : {FinishReason::kStop, FinishReason::kLength, FinishReason::kCancelled, FinishReason::kTimeout,
                           FinishReason::kError})
      sample(out, "autoglm_requests_total",
             metric_label("model", v.model) + "," + metric_label("finish_reason", finish_reason_name(r)),
             double(size_t(r) < v.stats.finished.size() ? v.stats.finished[size_t(r)] : 0));
  render_op_profile(out, engines);
}

}  // namespace

// Loads by result with their seconds, unloads by reason (the shelf's events); with mutex_ held.
void ServerMetrics::render_model_events(std::string& out) const {
  metric_header(out, "autoglm_model_loads_total", "counter", "Model loads by result (ok, failed).");
  for (const auto& [key, t] : model_events_)
    if (key.second == "loaded" || key.second == "load_failed")
      sample(out, "autoglm_model_loads_total",
             metric_label("model", key.first) + "," + metric_label("result", key.second == "loaded" ? "ok" : "failed"),
             double(t.count));
  metric_header(out, "autoglm_model_load_seconds_total", "counter", "Time spent loading each model.");
  for (const auto& [key, t] : model_events_)
    if (key.second == "loaded")
      sample(out, "autoglm_model_load_seconds_total", metric_label("model", key.first), t.seconds);
  metric_header(out, "autoglm_model_unloads_total", "counter",
                "Model unloads by reason (request: POST /models/unload; lru: room for another under models_max; "
                "idle: asleep after sleep_idle_seconds).");
  const std::string unloaded = "unloaded:";
  for (const auto& [key, t] : model_events_)
    if (key.second.rfind(unloaded, 0) == 0)
      sample(out, "autoglm_model_unloads_total",
             metric_label("model", key.first) + "," + metric_label("reason", key.second.substr(unloaded.size())),
             double(t.count));
}

std::string ServerMetrics::render(const std::vector<EngineView>& engines, const ToolStats* tools) const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    render_request_series(out, series_);
    metric_header(out, "autoglm_route_decisions_total", "counter",
                  "Requests a route sent to a model, by the kind of reason (rule, default, arm, override, kept, "
                  "escalated).");
    for (const auto& [key, n] : route_decisions_)
      sample(out, "autoglm_route_decisions_total",
             metric_label("route", std::get<0>(key)) + "," + metric_label("model", std::get<1>(key)) + "," +
                 metric_label("decision", std::get<2>(key)),
             double(n));
  }
  render_model_events(out);
  render_engine(out, engines);
  if (tools) {
    const auto counts = tools->snapshot();
    metric_header(out, "autoglm_tool_calls_total", "counter", "Tool executions by tool and outcome.");
    for (const auto& [tool, c] : counts)
      out += "autoglm_tool_calls_total{" + metric_label("tool", tool) + ",status=\"ok\"} " + std::to_string(c.ok) +
             "\nautoglm_tool_calls_total{" + metric_label("tool", tool) + ",status=\"error\"} " +
             std::to_string(c.error) + "\n";
    metric_header(out, "autoglm_tool_call_seconds_total", "counter", "Time spent running each tool.");
    for (const auto& [tool, c] : counts)
      out += "autoglm_tool_call_seconds_total{" + metric_label("tool", tool) + "} " + number(c.seconds) + "\n";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  metric_header(out, "autoglm_tasks_total", "counter", "Finished /v1/tasks requests by status.");
  for (const auto& [status, n] : tasks_by_status_)
    out += "autoglm_tasks_total{" + metric_label("status", status) + "} " + std::to_string(n) + "\n";
  metric_header(out, "autoglm_http_responses_total", "counter", "HTTP responses by status code.");
  for (const auto& [status, n] : by_status_)
    out += "autoglm_http_responses_total{code=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
  return out;
}

}  // namespace autoglm
