// autoglm serve: the OpenAI-compatible server.
#include <sys/resource.h>

#include <csignal>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "autoglm/server.h"
#include "cli/common.h"

namespace autoglm::cli {
namespace {

struct ServeArgs {
  std::string config_path, model, host, chat_template, reasoning_format, tool_call_format, mmproj, models_dir;
  int64_t models_max = -1;
  double sleep_idle_seconds = -1;
  bool models_autoload = true;
  int port = -1, threads = 0;
  int64_t ctx = 0, max_running = 0, max_batch_tokens = 0, max_queued = 0;
  double kv_mib = 0, cache_ram_mib = -1, cache_disk_mib = 0;
  std::string cache_disk_dir;
  std::string kv_type, quantize, spec, draft, draft_quantize, device;
  int32_t draft_max = 0, draft_min = -1, exit_layer = -1;
  double draft_p_min = -1;
  bool no_prefix_cache = false, no_webui = false;
  MemoryFlags memory;
  CpuMoeFlags cpu_moe;
  std::vector<std::string> api_keys;
  std::vector<std::string> served_names;  // --served-model-name, --alias
};

// Thousands of open streams need more descriptors than the default 1024.
void raise_file_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

// A string as a YAML value (JSON quoting, which YAML reads).
std::string yaml_string(const std::string& s) {
  return nlohmann::json(s).dump();
}

// The flags given, as configuration keys over the file's.
using ConfigOverrides = decltype(ServerOptions::overrides);  // (dotted key, YAML value) pairs

ConfigOverrides flag_overrides(const ServeArgs& a) {
  ConfigOverrides o;
  auto text = [&](const char* key, const std::string& v) {
    if (!v.empty()) o.emplace_back(key, yaml_string(v));
  };
  auto number = [&](const char* key, auto v, bool given) {
    if (given) o.emplace_back(key, std::to_string(v));
  };
  text("model", a.model);
  text("host", a.host);
  number("port", a.port, a.port >= 0);
  number("threads", a.threads, a.threads > 0);
  number("context_window", a.ctx, a.ctx > 0);
  number("max_running", a.max_running, a.max_running > 0);
  number("max_batch_tokens", a.max_batch_tokens, a.max_batch_tokens > 0);
  number("max_queued", a.max_queued, a.max_queued > 0);
  number("kv_cache.memory_mib", a.kv_mib, a.kv_mib > 0);
  text("kv_cache.dtype", a.kv_type);
  number("kv_cache.ram_mib", a.cache_ram_mib, a.cache_ram_mib >= 0);
  text("kv_cache.disk_dir", a.cache_disk_dir);
  number("kv_cache.disk_mib", a.cache_disk_mib, a.cache_disk_mib > 0);
  text("quantize", a.quantize);
  text("device", a.device);
  if (a.no_prefix_cache) o.emplace_back("prefix_cache", "false");
  if (a.memory.no_mmap) o.emplace_back("mmap", "false");
  if (a.memory.mlock) o.emplace_back("mlock", "true");
  if (a.cpu_moe.all) o.emplace_back("cpu_moe", "true");
  number("n_cpu_moe", a.cpu_moe.first_layers, a.cpu_moe.first_layers >= 0);
  if (a.no_webui) o.emplace_back("web_ui", "false");
  text("speculative.method", a.spec);
  text("speculative.draft", a.draft);
  text("speculative.draft_quantize", a.draft_quantize);
  number("speculative.exit_layer", a.exit_layer, a.exit_layer >= 0);
  number("speculative.draft_max", a.draft_max, a.draft_max > 0);
  number("speculative.draft_min", a.draft_min, a.draft_min >= 0);
  number("speculative.draft_p_min", a.draft_p_min, a.draft_p_min >= 0);
  text("chat_template", a.chat_template);
  text("mmproj", a.mmproj);
  text("reasoning_format", a.reasoning_format);
  text("tool_call_format", a.tool_call_format);
  if (!a.served_names.empty()) o.emplace_back("served_model_name", nlohmann::json(a.served_names).dump());
  text("models_dir", a.models_dir);
  number("models_max", a.models_max, a.models_max >= 0);
  if (!a.models_autoload) o.emplace_back("models_autoload", "false");
  number("sleep_idle_seconds", a.sleep_idle_seconds, a.sleep_idle_seconds >= 0);
  return o;
}

int serve(const ServeArgs& a) {
  raise_file_limit();

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);                    // reload the routes
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // every thread inherits the mask; main waits below

  ServerOptions options;
  options.config_path = a.config_path;
  options.overrides = flag_overrides(a);
  options.base = environment_options();
  options.api_keys = a.api_keys;
  options.on_listening = [&](const std::string& host, int port) {
    std::fprintf(stderr, "listening on http://%s:%d (loading)\n", host.c_str(), port);
  };
  auto server = Server::start(options);
  if (!server) return fail(server.status());
  std::fprintf(stderr, "ready: %s\n", (*server)->model_path().c_str());
  int sig = 0;
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) {
    const Status reloaded = (*server)->reload();
    if (reloaded.is_ok())
      std::fprintf(stderr, "SIGHUP: routes reloaded\n");
    else
      std::fprintf(stderr, "SIGHUP: routes not reloaded (the old ones stay): %s\n", reloaded.message().c_str());
  }
  std::fprintf(stderr, "stopping (signal %d): draining requests in flight for up to %g s\n", sig,
               (*server)->shutdown_grace_seconds());
  (*server)->stop();
  std::fprintf(stderr, "stopped\n");
  return 0;
}

}  // namespace

void register_serve(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("serve", "Serve the OpenAI-compatible API (/v1/chat/completions, /v1/completions, ...)");
  auto a = std::make_shared<ServeArgs>();
  cmd->add_option("--config", a->config_path, "YAML configuration file (flags override it)");
  cmd->add_option("-m,--model", a->model, "GGUF model file or Hugging Face folder");
  cmd->add_option("--models-dir", a->models_dir,
                  "Serve every GGUF file and model folder under DIR, each named by its file or folder name and "
                  "loaded when first asked for (models_dir)");
  cmd->add_flag("--models-autoload,!--no-models-autoload", a->models_autoload,
                "A request naming an unloaded model loads it (default on; off: a 404 until POST /models/load)");
  cmd->add_option("--models-max", a->models_max,
                  "Models loaded at once; past it the least recently used idle one unloads (0: no limit; default 4 "
                  "with --models-dir)")
      ->check(CLI::Range(int64_t(0), int64_t(4096)));
  cmd->add_option("--sleep-idle-seconds", a->sleep_idle_seconds,
                  "A model with no request this long frees its weights and KV until the next request (0: never)")
      ->check(CLI::Range(0.0, 365.0 * 86400));
  add_quantize_option(*cmd, a->quantize);
  add_memory_options(*cmd, a->memory);
  add_cpu_moe_options(*cmd, a->cpu_moe);
  cmd->add_option("--device", a->device, "Where the model runs: cpu, cuda or cuda:N (overrides device)");
  add_bf16_activations_option(*cmd);
  cmd->add_option("--host", a->host, "Address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", a->port, "Port (default 8080; 0: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("-t,--threads", a->threads, "Compute threads (default: physical cores)")->check(CLI::Range(1, 1024));
  cmd->add_option("-c,--ctx-size", a->ctx, "Context window per sequence")->check(CLI::PositiveNumber);
  cmd->add_option("--max-running", a->max_running, "Sequences decoded together")->check(CLI::PositiveNumber);
  cmd->add_option("--max-batch-tokens", a->max_batch_tokens, "Token budget of one step")->check(CLI::PositiveNumber);
  cmd->add_option("--max-queued", a->max_queued, "Waiting requests before 429")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-cache-mib", a->kv_mib, "KV cache memory budget in MiB")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-type", a->kv_type, "KV cache type: f16, q8_0 or f32 (overrides kv_cache.dtype)");
  cmd->add_flag("--no-prefix-cache", a->no_prefix_cache, "Do not reuse KV across requests");
  cmd->add_option("--cache-ram", a->cache_ram_mib,
                  "Prefix-cache blocks the KV pool evicts move to this much host RAM, in MiB (kv_cache.ram_mib)")
      ->check(CLI::Range(0.0, 1048576.0 * 64));
  cmd->add_option("--cache-disk-dir", a->cache_disk_dir,
                  "...and from RAM to files here, which outlive restarts (kv_cache.disk_dir)");
  cmd->add_option("--cache-disk-mib", a->cache_disk_mib,
                  "The disk tier's size in MiB (default 4096; kv_cache.disk_mib)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--chat-template", a->chat_template,
                  "Built-in template (chatml, llama2, llama3, glm4) or a Jinja file");
  cmd->add_option("--mmproj", a->mmproj,
                  "A vision-language model's projector GGUF (mmproj; default: X.mmproj.gguf beside X.gguf; none: "
                  "text only)");
  cmd->add_option("--api-key", a->api_keys, "Accepted API key (repeatable)");
  cmd->add_option("--served-model-name,--alias", a->served_names,
                  "A name requests may give as 'model' (repeatable; the first replaces the file's name in "
                  "/v1/models and replies; served_model_name)");
  cmd->add_option("--reasoning-format", a->reasoning_format,
                  "A thinking model's reasoning: auto (apart, as reasoning_content), none (left in the content) "
                  "or deepseek (reasoning_format)");
  cmd->add_option("--tool-call-format", a->tool_call_format,
                  "Tool-call format when the template's is misread: hermes, llama3, glm4, glm45, glm47, qwen3coder, "
                  "deepseek_v3_1 or harmony (tool_call_format)");
  cmd->add_flag("--no-webui", a->no_webui, "Serve no chat playground or dashboard at / (web_ui: false)");
  cmd->add_option("--spec", a->spec,
                  "Speculative decoding: none, draft, ngram, early-exit or mtp (overrides speculative.method)");
  cmd->add_option("--draft", a->draft, "Draft model file or folder for --spec draft (speculative.draft)");
  cmd->add_option("--draft-quantize", a->draft_quantize,
                  "Draft weights re-encoded at load; alone, the target's own (speculative.draft_quantize)");
  cmd->add_option("--exit-layer", a->exit_layer,
                  "Early exit: the layers that draft, 0 a quarter (speculative.exit_layer)");
  cmd->add_option("--draft-max", a->draft_max, "Most tokens drafted per pass (speculative.draft_max)");
  cmd->add_option("--draft-min", a->draft_min, "Fewer drafts than this: a plain decode (speculative.draft_min)");
  cmd->add_option("--draft-p-min", a->draft_p_min, "Drafting confidence threshold (speculative.draft_p_min)");
  cmd->callback([a] { exit_code() = serve(*a); });
}

}  // namespace autoglm::cli
