// autoglm: the command-line entry point. Each subcommand lives in its own file.
#include "cli/common.h"

int main(int argc, char** argv) {
  if (!autoglm::cli::apply_process_environment()) return 1;
  CLI::App app{"Open-AutoGLM: LLM inference engine (GGUF models on the CPU)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "autoglm 0.1.0");
  autoglm::cli::register_serve(app);
  autoglm::cli::register_run(app);
  autoglm::cli::register_tokenize(app);
  autoglm::cli::register_info(app);
  autoglm::cli::register_bench(app);
  autoglm::cli::register_logits(app);
  autoglm::cli::register_create_model(app);
  autoglm::cli::register_quantize(app);
  autoglm::cli::register_convert(app);
  autoglm::cli::register_export_lora(app);
  autoglm::cli::register_perplexity(app);
  autoglm::cli::register_imatrix(app);
  CLI11_PARSE(app, argc, argv);
  return autoglm::cli::exit_code();
}
