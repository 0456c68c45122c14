// autoglm convert: a Hugging Face folder to a GGUF file (and a vision-language model's projector).
#include <cstdio>

#include "autoglm/model_tools.h"
#include "cli/common.h"
#include "cli/progress.h"

namespace autoglm::cli {
namespace {

struct ConvertArgs {
  std::string in, out, type = "f16", mmproj;
  int threads = 0;
};

int convert(const ConvertArgs& a) {
  const auto type = weight_type_name(a.type);
  if (!type) return fail(invalid_argument("--type '" + a.type + "' is not a weight type (f16, q8_0, q4_k, ...)"));
  std::unique_ptr<ProgressBar> bar;
  ConvertModelOptions options;
  options.type = a.type;
  options.threads = a.threads;
  options.mmproj_out = a.mmproj;
  options.progress = [&](int64_t, int64_t total) {
    if (!bar) bar = std::make_unique<ProgressBar>("converting", total);
    bar->advance();
  };
  auto report = convert_hf_model(a.in, a.out, options);
  bar.reset();
  if (!report) return fail(report.status());
  std::printf("wrote %s: %lld tensors, matrices as %s, %.1f MiB\n", a.out.c_str(), (long long)report->tensors,
              type->c_str(), double(report->bytes_out) / 1048576.0);
  if (!report->mmproj_path.empty())
    std::printf("wrote %s: the projector (vision tower), %lld tensors, %.1f MiB\n", report->mmproj_path.c_str(),
                (long long)report->mmproj_tensors, double(report->mmproj_bytes) / 1048576.0);
  return 0;
}

}  // namespace

void register_convert(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert", "Convert a Hugging Face model folder to a GGUF file");
  auto a = std::make_shared<ConvertArgs>();
  cmd->add_option("folder", a->in, "Hugging Face folder (config.json, *.safetensors, tokenizer.json)")->required();
  cmd->add_option("-o,--output", a->out, "Output GGUF file")->required();
  cmd->add_option("--type", a->type, "Matrix type: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k")
      ->capture_default_str();
  cmd->add_option("--mmproj", a->mmproj,
                  "Where a vision-language folder's projector goes (default: beside the output, X.mmproj.gguf)");
  add_threads_option(*cmd, a->threads);
  cmd->callback([a] { exit_code() = convert(*a); });
}

}  // namespace autoglm::cli
