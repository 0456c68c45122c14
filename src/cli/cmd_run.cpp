// autoglm run: generate text from a prompt, streamed to stdout.
#include <cstdio>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/common.h"
#include "cli/spec_options.h"

namespace autoglm::cli {
namespace {

struct RunArgs {
  std::string device = "cpu";
  MemoryFlags memory;
  CpuMoeFlags cpu_moe;
  std::string model, prompt;
  int32_t n_predict = 128;
  int threads = 1;
  int64_t ctx = 0;
  bool no_special = false;
  std::string kv_type = "f16";
  std::string quantize;
  bool profile = false;
  int64_t seed = -1;
  std::string grammar_file, schema_file;
  SpecOptions spec;
  Request request;
  std::vector<std::string> lora;
  std::string mmproj;
  std::vector<std::string> images;
};

// The runtime for one sequence: its KV pool holds one whole context window (drafts included).
Result<RuntimeOptions> run_options(const RunArgs& a) {
  RuntimeOptions o;
  o.quantize = a.quantize;
  a.memory.apply_to(o);
  a.cpu_moe.apply_to(o);
  AUTOGLM_ASSIGN_OR_RETURN(o.device, parse_device(a.device));
  o.threads = a.threads;
  o.profile = a.profile;
  AUTOGLM_ASSIGN_OR_RETURN(o.kv_type, kv_type_option(a.kv_type));
  o.context_window = a.ctx > 0 ? a.ctx : 4096;  // capped by the model's trained context
  o.kv_memory_mib = 0;
  o.max_running = 1;
  o.max_queued = 1;
  o.max_batch_tokens = 512;
  AUTOGLM_RETURN_IF_ERROR(a.spec.apply_to(o));
  AUTOGLM_ASSIGN_OR_RETURN(o.lora, lora_options(a.lora));
  o.mmproj = a.mmproj;
  for (const std::string& image : a.images)  // files named on the command line may be read
    o.media.allowed_local_dirs.push_back(std::filesystem::absolute(image).parent_path().string());
  return o;
}

// --image: a user message of the images and the prompt, through the model's chat template.
Conversation image_chat(const RunArgs& a) {
  nlohmann::json content = nlohmann::json::array();
  for (const std::string& image : a.images)
    content.push_back({{"type", "image_url"}, {"image_url", {{"url", std::filesystem::absolute(image).string()}}}});
  content.push_back({{"type", "text"}, {"text", a.prompt}});
  Conversation c;
  c.messages_json = nlohmann::json::array({{{"role", "user"}, {"content", content}}}).dump();
  c.reasoning_format = ReasoningFormat::kNone;  // the text as the model writes it
  return c;
}

void print_stats(const StreamEvent& last, double decode_seconds, const RunArgs& a) {
  const double prefill_tps = last.prefill_seconds > 0 ? last.prompt_tokens / last.prefill_seconds : 0.0;
  // The first token comes with the prompt's pass; decoding makes the rest.
  const double decode_tps = decode_seconds > 0 ? double(last.completion_tokens - 1) / decode_seconds : 0.0;
  std::fprintf(stderr, "prompt tokens: %d, prefill: %.1f tok/s, generated tokens: %d, decode: %.1f tok/s\n",
               last.prompt_tokens, prefill_tps, last.completion_tokens, decode_tps);
  if (a.spec.method != "none") {
    const int64_t passes = std::max<int64_t>(1, last.completion_tokens - 1 - last.spec_accepted);
    const double rate = last.spec_drafted > 0 ? 100.0 * double(last.spec_accepted) / double(last.spec_drafted) : 0.0;
    std::fprintf(stderr, "speculation %s: drafted %lld, accepted %lld (%.1f%%), %.2f tokens per target pass\n",
                 a.spec.method.c_str(), (long long)last.spec_drafted, (long long)last.spec_accepted, rate,
                 double(std::max(last.completion_tokens - 1, 0)) / double(passes));
  }
}

int run(const RunArgs& a) {
  auto options = run_options(a);
  if (!options) return fail(options.status());
  auto rt = open_runtime(a.model, *options);
  if (!rt) return fail(rt.status());
  Request r = a.request;
  r.max_tokens = a.n_predict;
  if (a.seed >= 0) r.sampling.seed = uint64_t(a.seed);
  auto constraint = output_constraint(a.grammar_file, a.schema_file);
  if (!constraint) return fail(constraint.status());
  r.constraint = *constraint;
  if (a.images.empty())
    r.tokens = (*rt)->encode(a.prompt, /*add_special=*/true, /*parse_special=*/!a.no_special);
  else
    r.chat = image_chat(a);
  std::fputs(a.prompt.c_str(), stdout);
  std::fflush(stdout);
  auto handle = (*rt)->submit(r);
  if (!handle) return fail(handle.status());
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> first_token;
  StreamEvent ev;
  while ((*handle)->next(ev)) {
    if (!first_token && !ev.tokens.empty()) first_token = Clock::now();
    std::fputs(ev.text.c_str(), stdout);
    std::fflush(stdout);
    if (ev.finished) break;
  }
  std::fputc('\n', stdout);
  if (ev.finish_reason == FinishReason::kError) return fail(Status(StatusCode::kInternal, ev.error));
  const double decode_seconds = first_token ? std::chrono::duration<double>(Clock::now() - *first_token).count() : 0.0;
  print_stats(ev, decode_seconds, a);
  if (a.profile) std::fprintf(stderr, "per-op time over prefill and decode:\n%s", (*rt)->op_profile_table().c_str());
  if (const std::string draft = (*rt)->draft_op_profile_table(); a.profile && !draft.empty())
    std::fprintf(stderr, "per-op time of the drafter's passes (per token it ran, the prompt included):\n%s",
                 draft.c_str());
  return 0;
}

}  // namespace

void register_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt (streams to stdout)");
  auto a = std::make_shared<RunArgs>();
  cmd->add_option("-m,--model", a->model, "GGUF model file or Hugging Face folder")->required();
  cmd->add_option("-p,--prompt", a->prompt, "Prompt text")->required();
  cmd->add_option("--image", a->images,
                  "Image file (PNG, JPEG, WebP; repeatable) for a vision-language model: the images and the "
                  "prompt go in as one user message through the chat template");
  cmd->add_option("--mmproj", a->mmproj,
                  "The model's projector (vision tower) GGUF (default: X.mmproj.gguf beside X.gguf; none: text only)");
  add_kv_type_option(*cmd, a->kv_type);
  add_device_option(*cmd, a->device);
  add_bf16_activations_option(*cmd);
  add_quantize_option(*cmd, a->quantize);
  add_memory_options(*cmd, a->memory);
  add_cpu_moe_options(*cmd, a->cpu_moe);
  add_lora_option(*cmd, a->lora);
  cmd->add_flag("--profile", a->profile, "Print the per-op time breakdown per token");
  cmd->add_option("-n,--n-predict", a->n_predict, "Tokens to generate")->check(CLI::NonNegativeNumber);
  cmd->add_option("--temp", a->request.sampling.temperature, "Temperature (0: greedy)");
  cmd->add_option("--top-k", a->request.sampling.top_k, "Top-k (0: off)");
  cmd->add_option("--top-p", a->request.sampling.top_p, "Top-p (1: off)");
  cmd->add_option("--min-p", a->request.sampling.min_p, "Min-p (0: off)");
  cmd->add_option("--repeat-penalty", a->request.sampling.repetition_penalty, "Repetition penalty (1: off)");
  cmd->add_option("--frequency-penalty", a->request.sampling.frequency_penalty, "Frequency penalty");
  cmd->add_option("--presence-penalty", a->request.sampling.presence_penalty, "Presence penalty");
  cmd->add_option("--repeat-last-n", a->request.sampling.penalty_last_n, "Penalty window (-1: whole sequence)");
  cmd->add_option("--seed", a->seed, "Random seed (default: random)");
  cmd->add_option("--stop", a->request.stop, "Stop string (repeatable)");
  cmd->add_option("-c,--ctx-size", a->ctx, "Context size (default: the model's, at most 4096)");
  cmd->add_flag("--no-parse-special", a->no_special, "Treat <|...|> in the prompt as plain text");
  cmd->add_option("--grammar", a->grammar_file, "GBNF grammar file the output must follow");
  cmd->add_option("--json-schema", a->schema_file, "JSON Schema file the output must validate against");
  add_spec_options(*cmd, a->spec);
  add_threads_option(*cmd, a->threads);
  cmd->callback([a] { exit_code() = run(*a); });
}

}  // namespace autoglm::cli
