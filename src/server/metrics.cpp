#include "server/metrics.h"

#include <cstdio>

namespace autoglm {
namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
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

Histogram::Histogram(std::string name, std::string help, std::vector<double> bounds)
    : name_(std::move(name)), help_(std::move(help)), bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  metric_header(out, name_, "histogram", help_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name_ + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  cumulative += counts_.back();
  out += name_ + "_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  metric_sample(out, name_ + "_sum", sum_);
  out += name_ + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : time_to_first_token("autoglm_time_to_first_token_seconds", "Time from request arrival to its first token.",
                          kLatencyBounds),
      inter_token_latency("autoglm_inter_token_latency_seconds", "Time between consecutive streamed tokens.",
                          kLatencyBounds),
      e2e_latency("autoglm_e2e_request_latency_seconds", "Time from arrival to the last token.", kLatencyBounds),
      queue_time("autoglm_queue_time_seconds", "Time a request waited before its first scheduled step.",
                 kLatencyBounds),
      prefill_time("autoglm_prefill_time_seconds", "Time from the first scheduled step to the first token.",
                   kLatencyBounds) {}

void ServerMetrics::count_status(int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++by_status_[status];
}

void ServerMetrics::count_task(const std::string& status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++tasks_by_status_[status];
}

std::string ServerMetrics::render(const EngineStats& e, const OpProfile* profile, const ToolStats* tools) const {
  std::string out;
  for (const Histogram* h : {&time_to_first_token, &inter_token_latency, &e2e_latency, &queue_time, &prefill_time})
    h->render(out);
  auto counter = [&](const char* name, const char* help, double v) {
    metric_header(out, name, "counter", help);
    metric_sample(out, name, v);
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    metric_header(out, name, "gauge", help);
    metric_sample(out, name, v);
  };
  counter("autoglm_prompt_tokens_total", "Prompt tokens of admitted requests.", double(e.prompt_tokens.load()));
  counter("autoglm_generation_tokens_total", "Generated tokens.", double(e.generated_tokens.load()));
  counter("autoglm_prefix_cache_hit_tokens_total", "Prompt tokens whose KV came from the prefix cache.",
          double(e.prefix_hit_tokens.load()));
  counter("autoglm_prefix_cache_queried_tokens_total", "Prompt tokens looked up in the prefix cache.",
          double(e.prefix_queried_tokens.load()));
  counter("autoglm_preemptions_total", "Sequences preempted to free KV blocks.", double(e.preemptions.load()));
  counter("autoglm_engine_steps_total", "Batches run by the engine.", double(e.steps.load()));
  gauge("autoglm_requests_running", "Sequences in the running set.", double(e.running.load()));
  gauge("autoglm_requests_waiting", "Requests waiting to be admitted.", double(e.waiting.load()));
  gauge("autoglm_kv_blocks_used", "KV cache blocks referenced by sequences.", double(e.kv_blocks_used.load()));
  gauge("autoglm_kv_blocks_total", "KV cache blocks in the pool.", double(e.kv_blocks_total.load()));
  gauge("autoglm_scheduler_step_target_ms", "The last step's time target (0: planned by tokens only).",
        double(e.step_target_us.load()) / 1000.0);
  metric_header(out, "autoglm_scheduler_prefill_chunk_tokens", "histogram", "Prefill chunk sizes the scheduler chose.");
  int64_t cumulative = 0;
  for (int b = 0; b < EngineStats::kChunkBuckets; ++b) {
    cumulative += e.prefill_chunks[size_t(b)].load();
    const std::string le = b + 1 < EngineStats::kChunkBuckets ? std::to_string(8 << b) : "+Inf";
    out += "autoglm_scheduler_prefill_chunk_tokens_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += "autoglm_scheduler_prefill_chunk_tokens_sum " + std::to_string(e.prefill_chunk_tokens.load()) + "\n";
  out += "autoglm_scheduler_prefill_chunk_tokens_count " + std::to_string(cumulative) + "\n";
  counter("autoglm_spec_drafted_tokens_total", "Tokens drafted for speculative decoding.",
          double(e.spec_drafted.load()));
  counter("autoglm_spec_accepted_tokens_total", "Drafted tokens the target accepted.", double(e.spec_accepted.load()));
  counter("autoglm_spec_target_passes_total", "Target passes that verified drafts (one per sequence and step).",
          double(e.spec_passes.load()));
  metric_header(out, "autoglm_spec_acceptance_rate", "histogram", "Acceptance rate of finished requests that drafted.");
  int64_t drafted_requests = 0;
  for (int b = 0; b < EngineStats::kAcceptanceBuckets; ++b) {
    drafted_requests += e.spec_acceptance[size_t(b)].load();
    const std::string le = b + 1 < EngineStats::kAcceptanceBuckets ? "0." + std::to_string(b + 1) : "+Inf";
    out += "autoglm_spec_acceptance_rate_bucket{le=\"" + le + "\"} " + std::to_string(drafted_requests) + "\n";
  }
  out += "autoglm_spec_acceptance_rate_sum " + std::to_string(double(e.spec_acceptance_milli.load()) / 1000.0) + "\n";
  out += "autoglm_spec_acceptance_rate_count " + std::to_string(drafted_requests) + "\n";
  metric_header(out, "autoglm_requests_total", "counter", "Finished generation requests by finish reason.");
  // Every reason the engine ends a request with (tool_calls is decided above it).
  for (FinishReason r : {FinishReason::kStop, FinishReason::kLength, FinishReason::kCancelled, FinishReason::kTimeout,
                         FinishReason::kError})
    out += std::string("autoglm_requests_total{finish_reason=\"") + finish_reason_name(r) + "\"} " +
           std::to_string(e.finished_with(r)) + "\n";
  if (profile && profile->enabled()) {
    metric_header(out, "autoglm_op_seconds_total", "counter", "Forward-pass time by op (profile: true).");
    for (int i = 0; i < int(Op::kCount); ++i)
      out += std::string("autoglm_op_seconds_total{op=\"") + op_key(Op(i)) + "\"} " + number(profile->seconds(Op(i))) +
             "\n";
    counter("autoglm_op_profiled_tokens_total", "Tokens through the profiled forward passes.",
            double(profile->tokens()));
  }
  if (tools) {
    const auto counts = tools->snapshot();
    metric_header(out, "autoglm_tool_calls_total", "counter", "Tool executions by tool and outcome.");
    for (const auto& [tool, c] : counts)
      out += "autoglm_tool_calls_total{tool=\"" + tool + "\",status=\"ok\"} " + std::to_string(c.ok) +
             "\nautoglm_tool_calls_total{tool=\"" + tool + "\",status=\"error\"} " + std::to_string(c.error) + "\n";
    metric_header(out, "autoglm_tool_call_seconds_total", "counter", "Time spent running each tool.");
    for (const auto& [tool, c] : counts)
      out += "autoglm_tool_call_seconds_total{tool=\"" + tool + "\"} " + number(c.seconds) + "\n";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  metric_header(out, "autoglm_tasks_total", "counter", "Finished /v1/tasks requests by status.");
  for (const auto& [status, n] : tasks_by_status_)
    out += "autoglm_tasks_total{status=\"" + status + "\"} " + std::to_string(n) + "\n";
  metric_header(out, "autoglm_http_responses_total", "counter", "HTTP responses by status code.");
  for (const auto& [status, n] : by_status_)
    out += "autoglm_http_responses_total{code=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
  return out;
}

}  // namespace autoglm
