// autoglm run: generate text from a prompt, streamed to stdout.
#include <cstdio>

#include "cli/common.h"
#include "cli/spec_options.h"
#include "engine/generator.h"

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
  GenerationRequest gen;
  std::vector<std::string> lora;
};

int run(const RunArgs& a) {
  RuntimeOptions options;
  options.quantize = a.quantize;
  a.memory.apply_to(options);
  a.cpu_moe.apply_to(options);
  options.device = a.device;
  options.threads = a.threads;
  options.start_engine = false;
  auto lora = lora_options(a.lora);
  if (!lora) return fail(lora.status());
  options.lora = *lora;
  auto rt = open_runtime(a.model, options);
  if (!rt) return fail(rt.status());
  const Model& model = *(*rt)->parts().model;
  const Tokenizer& tok = *(*rt)->parts().tokenizer;
  const int64_t n_ctx = a.ctx > 0 ? a.ctx : std::min<int64_t>(model.spec().n_ctx_train, 4096);
  GenerationRequest gen = a.gen;
  gen.max_tokens = a.n_predict;
  auto grammar = load_output_grammar(a.grammar_file, a.schema_file);
  if (!grammar) return fail(grammar.status());
  gen.grammar = *grammar;
  if (a.seed >= 0) gen.sampling.seed = uint64_t(a.seed);

  const auto prompt = tok.encode(a.prompt, /*add_special=*/true, /*parse_special=*/!a.no_special);
  auto kv_type = resolve_kv_type(a.kv_type, model.spec());
  if (!kv_type) return fail(kv_type.status());
  Generator generator(model, tok, *(*rt)->parts().pool, n_ctx, *kv_type);
  generator.set_lora((*rt)->parts().default_lora);
  auto speculation = prepare_speculation(a.spec, a.model, model, tok.vocab(), *(*rt)->parts().pool);
  if (!speculation) return fail(speculation.status());
  if (auto s = generator.set_speculation(speculation->config, speculation->draft.get()); !s.is_ok()) return fail(s);
  if (OpProfile* draft = generator.draft_profile()) draft->set_enabled(a.profile);
  generator.profile().set_enabled(a.profile);
  std::fputs(a.prompt.c_str(), stdout);
  std::fflush(stdout);
  gen.prompt = prompt;
  auto result = generator.generate(gen, [](const std::string& text) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputc('\n', stdout);
  if (!result) return fail(result.status());
  const auto& r = *result;
  const double decode_tps = r.decode_seconds > 0 ? double(r.tokens.size()) / r.decode_seconds : 0;
  std::fprintf(stderr, "prompt tokens: %d, prefill: %.1f tok/s, generated tokens: %zu, decode: %.1f tok/s\n",
               r.prompt_tokens, r.prefill_seconds > 0 ? r.prompt_tokens / r.prefill_seconds : 0.0, r.tokens.size(),
               decode_tps);
  if (speculation->config.method != SpecMethod::kNone)
    std::fprintf(stderr, "speculation %s: drafted %lld, accepted %lld (%.1f%%), %.2f tokens per target pass\n",
                 spec_method_name(speculation->config.method), (long long)r.spec.drafted, (long long)r.spec.accepted,
                 100.0 * r.spec.acceptance(), r.spec.tokens_per_pass());
  if (a.profile) std::fprintf(stderr, "per-op time over prefill and decode:\n%s", generator.profile().table().c_str());
  if (OpProfile* draft = generator.draft_profile(); draft && a.profile)
    std::fprintf(stderr, "per-op time of the drafter's passes (per token it ran, the prompt included):\n%s",
                 draft->table().c_str());
  return 0;
}

}  // namespace

void register_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt (streams to stdout)");
  auto a = std::make_shared<RunArgs>();
  cmd->add_option("-m,--model", a->model, "GGUF model file or Hugging Face folder")->required();
  cmd->add_option("-p,--prompt", a->prompt, "Prompt text")->required();
  add_kv_type_option(*cmd, a->kv_type);
  add_device_option(*cmd, a->device);
  add_bf16_activations_option(*cmd);
  add_quantize_option(*cmd, a->quantize);
  add_memory_options(*cmd, a->memory);
  add_cpu_moe_options(*cmd, a->cpu_moe);
  add_lora_option(*cmd, a->lora);
  cmd->add_flag("--profile", a->profile, "Print the per-op time breakdown per token");
  cmd->add_option("-n,--n-predict", a->n_predict, "Tokens to generate")->check(CLI::NonNegativeNumber);
  cmd->add_option("--temp", a->gen.sampling.temperature, "Temperature (0: greedy)");
  cmd->add_option("--top-k", a->gen.sampling.top_k, "Top-k (0: off)");
  cmd->add_option("--top-p", a->gen.sampling.top_p, "Top-p (1: off)");
  cmd->add_option("--min-p", a->gen.sampling.min_p, "Min-p (0: off)");
  cmd->add_option("--repeat-penalty", a->gen.sampling.repetition_penalty, "Repetition penalty (1: off)");
  cmd->add_option("--frequency-penalty", a->gen.sampling.frequency_penalty, "Frequency penalty");
  cmd->add_option("--presence-penalty", a->gen.sampling.presence_penalty, "Presence penalty");
  cmd->add_option("--repeat-last-n", a->gen.sampling.penalty_last_n, "Penalty window (-1: whole sequence)");
  cmd->add_option("--seed", a->seed, "Random seed (default: random)");
  cmd->add_option("--stop", a->gen.stop, "Stop string (repeatable)");
  cmd->add_option("-c,--ctx-size", a->ctx, "Context size (default: the model's, at most 4096)");
  cmd->add_flag("--no-parse-special", a->no_special, "Treat <|...|> in the prompt as plain text");
  cmd->add_option("--grammar", a->grammar_file, "GBNF grammar file the output must follow");
  cmd->add_option("--json-schema", a->schema_file, "JSON Schema file the output must validate against");
  add_spec_options(*cmd, a->spec);
  add_threads_option(*cmd, a->threads);
  cmd->callback([a] { exit_code() = run(*a); });
}

}  // namespace autoglm::cli
