// autoglm serve: the OpenAI-compatible server.
#include <sys/resource.h>

#include <csignal>
#include <cstdio>

#include "cli/common.h"
#include "server/api.h"
#include "server/http_server.h"

namespace autoglm::cli {
namespace {

struct ServeArgs {
  std::string config_path, model, host, chat_template;
  int port = -1, threads = 0;
  int64_t ctx = 0, max_running = 0, max_batch_tokens = 0, max_queued = 0;
  double kv_mib = 0;
  std::string kv_type, quantize, spec, draft, draft_quantize;
  int32_t draft_max = 0, draft_min = -1, exit_layer = -1;
  double draft_p_min = -1;
  bool no_prefix_cache = false;
  std::vector<std::string> api_keys;
};

// Thousands of open streams need more descriptors than the default 1024.
void raise_file_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

int serve(const ServeArgs& a) {
  ServerConfig cfg;
  if (!a.config_path.empty()) {
    auto loaded = load_server_config(a.config_path);
    if (!loaded) return fail(loaded.status());
    cfg = *loaded;
  }
  if (!a.model.empty()) cfg.model = a.model;
  if (!a.host.empty()) cfg.host = a.host;
  if (a.port >= 0) cfg.port = a.port;
  if (a.threads > 0) cfg.threads = a.threads;
  if (a.ctx > 0) cfg.context_window = a.ctx;
  if (a.max_running > 0) cfg.max_running = a.max_running;
  if (a.max_batch_tokens > 0) cfg.max_batch_tokens = a.max_batch_tokens;
  if (a.max_queued > 0) cfg.max_queued = a.max_queued;
  if (a.kv_mib > 0) cfg.kv_cache_mib = a.kv_mib;
  if (!a.kv_type.empty()) cfg.kv_dtype = a.kv_type;
  if (!a.quantize.empty()) cfg.quantize = a.quantize;
  if (a.no_prefix_cache) cfg.prefix_cache = false;
  if (!a.spec.empty()) cfg.speculative = a.spec;
  if (!a.draft.empty()) cfg.draft_model = a.draft;
  if (!a.draft_quantize.empty()) cfg.draft_quantize = a.draft_quantize;
  if (a.exit_layer >= 0) cfg.exit_layer = a.exit_layer;
  if (a.draft_max > 0) cfg.draft_max = a.draft_max;
  if (a.draft_min >= 0) cfg.draft_min = a.draft_min;
  if (a.draft_p_min >= 0) cfg.draft_p_min = a.draft_p_min;
  if (!a.chat_template.empty()) cfg.chat_template = a.chat_template;
  for (const auto& k : a.api_keys) cfg.api_keys.push_back(k);
  if (cfg.model.empty()) return fail(invalid_argument("no model: give -m/--model or 'model' in the config"));
  raise_file_limit();

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);                    // no reload: ignored with a log line instead of killing the server
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // every thread inherits the mask; main waits below

  ApiService api(cfg);
  HttpServer server(api, 2);
  if (Status st = server.start(cfg.host, cfg.port); !st) return fail(st);
  std::fprintf(stderr, "listening on http://%s:%d (loading %s)\n", cfg.host.c_str(), server.port(), cfg.model.c_str());
  if (Status st = api.load(environment_options()); !st) {
    server.stop();
    return fail(st);
  }
  std::fprintf(stderr, "ready: %s\n", cfg.model.c_str());
  int sig = 0;
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP)
    std::fprintf(stderr, "SIGHUP ignored: the server does not reload; restart it to apply a new config\n");
  std::fprintf(stderr, "stopping (signal %d): draining requests in flight for up to %g s\n", sig, cfg.shutdown_grace_s);
  // In this order: stop accepting and drain (the HTTP server), then the tasks and the engine
  // (the service), then free.
  server.drain_and_stop(cfg.shutdown_grace_s);
  api.shutdown();
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
  add_quantize_option(*cmd, a->quantize);
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
  cmd->add_option("--chat-template", a->chat_template,
                  "Built-in template (chatml, llama2, llama3, glm4) or a Jinja file");
  cmd->add_option("--api-key", a->api_keys, "Accepted API key (repeatable)");
  cmd->add_option("--spec", a->spec,
                  "Speculative decoding: none, draft, ngram or early-exit (overrides speculative.method)");
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
