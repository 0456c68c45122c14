// autoglm info: what a model file holds.
#include <cstdio>

#include "cli/common.h"

namespace autoglm::cli {
namespace {

int info(const std::string& path) {
  RuntimeOptions options;
  options.start_engine = false;
  options.threads = 1;
  auto rt = open_runtime(path, options);
  if (!rt) {
    std::fputs(describe_model_file(path).c_str(), stdout);
    return fail(rt.status());
  }
  std::fputs((*rt)->describe().c_str(), stdout);
  return 0;
}

}  // namespace

void register_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Describe a model: architecture, shapes, weight types, size");
  auto path = std::make_shared<std::string>();
  cmd->add_option("-m,--model", *path, "GGUF model file or Hugging Face folder")->required();
  cmd->callback([path] { exit_code() = info(*path); });
}

}  // namespace autoglm::cli
