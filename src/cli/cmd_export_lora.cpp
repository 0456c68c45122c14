// autoglm export-lora: a GGUF model with LoRA adapters merged into its weights.
#include <cstdio>

#include "autoglm/model_tools.h"
#include "cli/common.h"

namespace autoglm::cli {
namespace {

struct ExportArgs {
  std::string model, out, type;
  std::vector<std::string> lora;
};

int export_lora(const ExportArgs& a) {
  if (a.lora.empty()) return fail(invalid_argument("--lora: give at least one adapter to merge"));
  if (!a.type.empty() && !weight_type_name(a.type))
    return fail(invalid_argument("--type '" + a.type + "' is not a weight type (f32, f16, q8_0, ...)"));
  auto adapters = lora_options(a.lora);
  if (!adapters) return fail(adapters.status());
  if (Status st = merge_lora_model(a.model, *adapters, a.type, a.out); !st.is_ok()) return fail(st);
  std::printf("wrote %s: %s with %zu adapter(s) merged\n", a.out.c_str(), a.model.c_str(), adapters->size());
  return 0;
}

}  // namespace

void register_export_lora(CLI::App& app) {
  auto* cmd = app.add_subcommand("export-lora", "Write a GGUF model with LoRA adapters merged into its weights");
  auto a = std::make_shared<ExportArgs>();
  cmd->add_option("-m,--model", a->model, "The base model (a GGUF file)")->required();
  add_lora_option(*cmd, a->lora);
  cmd->add_option("-o,--output", a->out, "Output GGUF file")->required();
  cmd->add_option("--type", a->type, "Type of the merged matrices (default: each base tensor's own)");
  cmd->callback([a] { exit_code() = export_lora(*a); });
}

}  // namespace autoglm::cli
