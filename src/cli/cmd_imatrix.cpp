// autoglm imatrix: the importance matrix of a model over a text (llama-imatrix's statistics and
// file format), for quantize --imatrix.
#include <cstdio>

#include "autoglm/model_tools.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "core/read_file.h"

namespace autoglm::cli {
namespace {

struct ImatrixArgs {
  std::string model, text_file, out = "imatrix.gguf";
  ImatrixOptions options;
};

int imatrix(ImatrixArgs a) {
  auto text = read_file(a.text_file);
  if (!text) return fail(text.status());
  a.options.dataset = a.text_file;
  std::unique_ptr<ProgressBar> bar;
  a.options.on_chunk = [&](int64_t done, int64_t total, double ppl, double seconds) {
    if (!bar) {
      std::fprintf(stderr, "computing over %lld chunks of %lld tokens, %.2f seconds per chunk\n", (long long)total,
                   (long long)a.options.n_ctx, seconds);
      bar = std::make_unique<ProgressBar>("imatrix", total);
    }
    bar->advance();
    std::printf("[%lld]%.4f,", (long long)done, ppl);
    std::fflush(stdout);
  };
  auto report = compute_imatrix(a.model, *text, a.out, a.options);
  bar.reset();
  if (!report) return fail(report.status());
  std::printf("\nFinal estimate: PPL = %.4f\nwrote %s: %lld matrices over %lld chunks\n", report->ppl, a.out.c_str(),
              (long long)report->entries, (long long)report->n_chunk);
  return 0;
}

}  // namespace

void register_imatrix(CLI::App& app) {
  auto* cmd = app.add_subcommand("imatrix", "Importance matrix of a model over a text (for quantize --imatrix)");
  auto a = std::make_shared<ImatrixArgs>();
  cmd->add_option("-m,--model", a->model, "GGUF model file or Hugging Face folder")->required();
  cmd->add_option("-f,--file", a->text_file, "Text to run the model over")->required();
  cmd->add_option("-o,--output", a->out, "Output file (llama.cpp's imatrix GGUF)")->capture_default_str();
  cmd->add_option("-c,--ctx-size", a->options.n_ctx, "Tokens per chunk")->capture_default_str();
  cmd->add_option("--chunks", a->options.max_chunks, "At most this many chunks (-1: all)")->capture_default_str();
  cmd->add_option("--output-frequency", a->options.save_every, "Write the output every N chunks (0: at the end)")
      ->capture_default_str();
  cmd->add_flag("--process-output", a->options.process_output, "Also collect output.weight");
  add_threads_option(*cmd, a->options.threads);
  cmd->callback([a] { exit_code() = imatrix(*a); });
}

}  // namespace autoglm::cli
