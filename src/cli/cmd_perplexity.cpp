// autoglm perplexity: perplexity over a text file, and the KL-divergence of a model against a
// base model's saved log-probabilities, printed as llama-perplexity prints them.
#include <cmath>
#include <cstdio>

#include "autoglm/perplexity.h"
#include "cli/common.h"
#include "core/read_file.h"

namespace autoglm::cli {
namespace {

struct PerplexityArgs {
  std::string model, text_file, kl_base, device = "cpu", kv_type = "f16";
  MemoryFlags memory;
  bool kl_divergence = false;
  int64_t n_ctx = 512, chunks = -1;
  int threads = 0;
};

void print_chunk(const PerplexityProgress& p) {
  if (p.chunk == 1) std::fprintf(stderr, "%.2f seconds per pass\n", p.seconds);
  if (!p.kl) {
    std::printf("[%lld]%.4f,", (long long)p.chunk, p.ppl);
  } else {
    const auto& k = *p.kl;
    std::printf(
        "%4lld    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
        (long long)p.chunk, k.ppl.value, k.ppl.error, k.ln_ppl_ratio.value, k.ln_ppl_ratio.error, k.kld.value,
        k.kld.error, 100 * k.rms_delta_p.value, 100 * k.rms_delta_p.error, 100 * k.same_top.value,
        100 * k.same_top.error);
  }
  std::fflush(stdout);
}

void print_kl(const KlDivergenceStats& k) {
  std::printf("\n====== Perplexity statistics ======\n");
  std::printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", k.ppl.value, k.ppl.error);
  std::printf("Mean PPL(base)                : %10.6f ± %10.6f\n", k.base_ppl.value, k.base_ppl.error);
  std::printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100 * k.ppl_correlation);
  std::printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", k.ln_ppl_ratio.value, k.ln_ppl_ratio.error);
  const double ratio = std::exp(k.ln_ppl_ratio.value);
  std::printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", ratio, ratio * k.ln_ppl_ratio.error);
  std::printf("\n====== KL divergence statistics ======\n");
  std::printf("Mean    KLD: %10.6f ± %10.6f\n", k.kld.value, k.kld.error);
  const std::pair<const char*, double> kld[] = {
      {"Maximum KLD", k.kld_max}, {"99.9%   KLD", k.kld_p99_9},  {"99.0%   KLD", k.kld_p99}, {"95.0%   KLD", k.kld_p95},
      {"90.0%   KLD", k.kld_p90}, {"Median  KLD", k.kld_median}, {"10.0%   KLD", k.kld_p10}, {" 5.0%   KLD", k.kld_p5},
      {" 1.0%   KLD", k.kld_p1},  {" 0.1%   KLD", k.kld_p0_1},   {"Minimum KLD", k.kld_min}};
  for (const auto& [label, v] : kld) std::printf("%s: %10.6f\n", label, v);
  std::printf("\n====== Token probability statistics ======\n");
  std::printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100 * k.delta_p.value, 100 * k.delta_p.error);
  const std::pair<const char*, double> dp[] = {
      {"Maximum Δp", k.delta_p_max},    {"99.9%   Δp", k.delta_p_p99_9}, {"99.0%   Δp", k.delta_p_p99},
      {"95.0%   Δp", k.delta_p_p95},    {"90.0%   Δp", k.delta_p_p90},   {"75.0%   Δp", k.delta_p_p75},
      {"Median  Δp", k.delta_p_median}, {"25.0%   Δp", k.delta_p_p25},   {"10.0%   Δp", k.delta_p_p10},
      {" 5.0%   Δp", k.delta_p_p5},     {" 1.0%   Δp", k.delta_p_p1},    {" 0.1%   Δp", k.delta_p_p0_1},
      {"Minimum Δp", k.delta_p_min}};
  for (const auto& [label, v] : dp) std::printf("%s: %6.3f%%\n", label, 100 * v);
  std::printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100 * k.rms_delta_p.value, 100 * k.rms_delta_p.error);
  std::printf("Same top p: %6.3f ± %5.3f %%\n", 100 * k.same_top.value, 100 * k.same_top.error);
}

int perplexity(const PerplexityArgs& a) {
  if (a.kl_divergence && a.kl_base.empty())
    return fail(
        invalid_argument("--kl-divergence needs --kl-divergence-base FILE (the base model's log-probabilities)"));
  if (!a.kl_divergence && a.text_file.empty()) return fail(invalid_argument("-f/--file: give the text to score"));
  std::string text;
  if (!a.kl_divergence) {
    auto read = read_file(a.text_file);
    if (!read) return fail(read.status());
    text = *read;
  }
  auto options = offline_runtime_options(a.device, a.kv_type, a.threads, a.memory);
  if (!options) return fail(options.status());
  auto rt = open_runtime(a.model, *options);
  if (!rt) return fail(rt.status());
  PerplexityOptions o;
  o.n_ctx = a.n_ctx;
  o.max_chunks = a.chunks;
  (a.kl_divergence ? o.kl_base : o.save_base) = a.kl_base;
  if (a.kl_divergence)
    std::printf(
        "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS           "
        " Same top p\n");
  o.on_chunk = print_chunk;
  auto report = measure_perplexity(**rt, text, o);
  if (!report) return fail(report.status());
  std::printf("\n");
  if (report->kl) {
    print_kl(*report->kl);
  } else {
    std::printf("Final estimate: PPL = %.4f +/- %.5f\n", report->ppl.value, report->ppl.error);
  }
  std::fprintf(stderr, "%lld chunks of %lld tokens, %lld positions scored%s\n", (long long)report->n_chunk,
               (long long)report->n_ctx, (long long)report->scored,
               o.save_base.empty() ? "" : (", log-probabilities saved to " + o.save_base).c_str());
  return 0;
}

}  // namespace

void register_perplexity(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "perplexity", "Perplexity over a text, and KL-divergence against a base model's saved log-probabilities");
  auto a = std::make_shared<PerplexityArgs>();
  cmd->add_option("-m,--model", a->model, "GGUF model file or Hugging Face folder")->required();
  cmd->add_option("-f,--file", a->text_file, "Text file to score");
  cmd->add_option("-c,--ctx-size", a->n_ctx, "Tokens per chunk; the second half of each is scored")
      ->capture_default_str();
  cmd->add_option("--chunks", a->chunks, "Score at most this many chunks (-1: all)")->capture_default_str();
  cmd->add_option("--kl-divergence-base", a->kl_base,
                  "Alone: save the log-probabilities here (the base model); with --kl-divergence: compare with them");
  cmd->add_flag("--kl-divergence", a->kl_divergence, "Compare with the --kl-divergence-base file (its tokens)");
  add_kv_type_option(*cmd, a->kv_type);
  add_device_option(*cmd, a->device);
  add_memory_options(*cmd, a->memory);
  add_threads_option(*cmd, a->threads);
  cmd->callback([a] { exit_code() = perplexity(*a); });
}

}  // namespace autoglm::cli
