// The server's YAML configuration. Unknown keys and bad values are errors that
// name the key and its line; command-line flags override the file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/jobs/async_jobs.h"
#include "server/routing/response_cache.h"
#include "server/routing/routing.h"

#include "autoglm/limits.h"
#include "autoglm/runtime.h"
#include "autoglm/status.h"
#include "tasks/task_pipeline.h"
#include "tasks/tools.h"

namespace autoglm {

struct ServerConfig;

// One of several models behind the endpoint (`models:`, or a file or folder of `models_dir`).
struct ServedModel {
  std::string name;                            // what requests give as `model`
  std::vector<std::string> aliases;            // other names it answers to (served_model_name)
  double kv_cache_share = 0;                   // of the KV budget; 0: an equal part of what the others leave
  std::shared_ptr<const ServerConfig> config;  // the top-level keys with the entry's own on top
  bool on_demand = false;                      // found in models_dir: loaded when first asked for, not at start
};

// What one client (API key, or address) may hold of max_body_bytes_in_flight: the configured
// share, or a quarter.
int64_t body_budget_share(const ServerConfig& c);

// A LoRA adapter served over a model: requests name it as their `model`.
struct LoraAdapterConfig {
  std::string name;
  std::string path;  // a PEFT folder or a GGUF adapter
  float scale = 1.0f;
};

// The server's runtime defaults: the library's, with the scheduler's step target on auto.
inline RuntimeOptions server_runtime_defaults() {
  RuntimeOptions o;
  o.max_step_ms = -1;
  return o;
}

struct ServerConfig {
  std::string model;  // GGUF file or Hugging Face folder
  // The names requests may give as `model` (vLLM's --served-model-name, llama-server's --alias):
  // for a single `model`, the first replaces its file name and the rest answer too; in a
  // `models:` entry, more names beside its `name`.
  std::vector<std::string> served_model_name;
  std::vector<LoraAdapterConfig> lora_adapters;  // over `model`
  // How each model is loaded and served, one spelling per setting; the YAML keys (docs/API.md,
  // config/default.yaml) map onto it: quantize, mmap (use_mmap), mlock (use_mlock), device, cpu_moe,
  // n_cpu_moe, engine (architecture), chat_template, context_window, threads, max_loras,
  // kv_cache.{memory_mib (kv_memory_mib), fraction (kv_memory_fraction), block_size (kv_block_size),
  // dtype (kv_type)}, prefix_cache, profile, max_batch_tokens, max_running, max_queued,
  // scheduler.max_step_ms (-1 auto: the server's default, flat inter-token latency under load;
  // 0 off: a token budget; else ms), speculative.{method (speculative), draft (draft_model),
  // draft_quantize, draft_max, draft_min, draft_p_min, exit_layer}, limits (what one request
  // may cost).
  RuntimeOptions runtime = server_runtime_defaults();
  std::string host = "127.0.0.1";
  int port = 8080;
  bool prefix_cache_per_key = true;  // each API key its own cached prefixes (false: shared by all keys)
  int64_t max_body_bytes = 8 << 20;
  int64_t max_body_bytes_in_flight = int64_t(512) << 20;  // bodies being read or prepared, all connections
  // Of max_body_bytes_in_flight, what one client (API key, or address) may hold; 0: a quarter.
  int64_t max_body_bytes_in_flight_per_client = 0;
  double body_timeout_s = 10;                 // the longest wait for a body's next bytes (its whole body: 60 s)
  double stream_write_timeout_s = 60;         // a stream's write pending this long: its client stopped reading
  double shutdown_grace_s = 30;               // SIGTERM/SIGINT: how long requests in flight may finish
  int64_t max_connections = 4096;             // open connections; more are closed at once
  std::optional<Pooling> embeddings_pooling;  // /v1/embeddings: nullopt auto (the model's), last or mean
  std::string access_log = "-";               // one line per request: "-" stderr, a file, "" off
  double rate_limit_per_second = 0;           // requests per client (API key, or address); 0: off
  double rate_limit_burst = 20;               // requests a client may send at once
  std::map<std::string, int> priorities = {{"low", -10}, {"normal", 0}, {"high", 10}};
  std::vector<std::string> api_keys;
  bool metrics_require_key = false;
  // A thinking model's reasoning: apart (reasoning_content) or in the content; a request's own
  // `reasoning_format` wins.
  ReasoningFormat reasoning_format = ReasoningFormat::kAuto;
  bool web_ui = true;  // the chat playground at / and the live dashboard at /dashboard
  // CORS (off while allow_origins is empty): "*" or exact origins ("https://app.example.com").
  std::vector<std::string> cors_allow_origins;
  std::vector<std::string> cors_allow_headers = {"Authorization", "Content-Type"};
  int64_t cors_max_age = 600;  // /metrics needs a key too (off: scrapers expect an open endpoint)
  std::vector<ToolConfig> tools;
  std::vector<std::string> http_allowlist;                      // hosts http tools may reach; empty: loopback
  std::map<std::string, std::vector<std::string>> tool_access;  // API key -> tools it may run; absent: all
  TaskOptions task;
  // response_cache: {enabled, max_entries, max_bytes, ttl_s}: deterministic requests answered again from memory.
  ResponseCacheConfig response_cache;
  // models: several models, each with its own engine and KV pool (empty: the single `model`).
  std::vector<ServedModel> models;
  // models_dir (--models-dir): every GGUF file and Hugging Face folder under it is a model named by
  // its file or folder name (a projector beside a model pairs with it), loaded on the first request
  // that names it (models_autoload) or by POST /models/load; read when the configuration loads.
  std::string models_dir;
  std::vector<ServedModel> dir_models;  // what models_dir holds (a name of `models:` keeps its entry)
  bool models_autoload = true;          // a request naming an unloaded model loads it (false: a 404)
  // Models loaded at once; a load that would pass it first unloads the least recently used idle
  // model. 0: no limit; -1 (auto): 4 with models_dir, else no limit.
  int64_t models_max = -1;
  // A model with no request for this long frees its weights and KV, and loads again on the next
  // request (0: never).
  double sleep_idle_seconds = 0;
  RouteTable routes;         // routes: virtual model names (rules, cascade, split)
  std::string feedback_log;  // POST /v1/feedback verdicts as JSON lines in this file ("": metrics only)
  JobsConfig jobs;           // jobs: asynchronous requests, durable in data_dir ("": off)
};

// The models a configuration serves: `models:`, or the single `model` named by its file; then
// those of models_dir.
std::vector<ServedModel> served_models(const ServerConfig& config);
// models_max with auto resolved: 0 for no limit.
int64_t models_max_of(const ServerConfig& config);
// The models under `dir` (sorted by name): each *.gguf file but projectors (mmproj*) and the
// later shards of a split file (-0000N-of-, N > 1), each folder with config.json, and each folder
// of GGUF files (named by the folder when it holds one model, else by each file). Each starts
// from `top`'s keys. Errors name the folder.
Result<std::vector<ServedModel>> scan_models_dir(const std::string& dir, const ServerConfig& top);
std::vector<std::string> served_model_names(const ServerConfig& config);
// A model path's name as the API shows it: the file or folder name.
std::string model_name_of_path(std::string path);

// Rules across keys that command-line flags can still change (--api-key), checked when the
// service loads: no API key is empty; tool_access needs api_keys, and names only keys among
// them (else any caller could claim a key, or go without one, and run every tool).
Status check_access_rules(const ServerConfig& config);

// Parses YAML text; `origin` names the file in messages.
Result<ServerConfig> parse_server_config(const std::string& yaml, const std::string& origin);
Result<ServerConfig> load_server_config(const std::string& path);
// Keys set on top of a configuration: dotted paths ("port", "kv_cache.dtype") and YAML (or
// JSON) values ("8080", "q8_0", "{method: ngram}"). The CLI's flags and the Python service's
// keyword arguments reach the configuration this way.
using ConfigOverrides = std::vector<std::pair<std::string, std::string>>;
// The file (an empty path: the defaults) with the overrides applied, checked as one.
Result<ServerConfig> load_server_config(const std::string& path, const ConfigOverrides& overrides);

}  // namespace autoglm
