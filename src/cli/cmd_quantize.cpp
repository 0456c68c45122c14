// autoglm quantize: re-encode a GGUF model's matrices in another weight type.
#include <cstdio>

#include "autoglm/model_tools.h"
#include "cli/common.h"
#include "cli/progress.h"

namespace autoglm::cli {
namespace {

struct QuantizeArgs {
  std::string in, out, type, keep_type = "q8_0";
  int threads = 0;
};

// The canonical name ("Q4_K") of the type called `name`; an error names the argument.
Result<std::string> weight_type(const std::string& name, const char* what) {
  auto t = weight_type_name(name);
  if (!t) return invalid_argument(std::string(what) + " '" + name + "' is not a weight type");
  return t;
}

int quantize(const QuantizeArgs& a) {
  QuantizeModelOptions o;
  auto type = weight_type(a.type, "TYPE");
  if (!type) return fail(type.status());
  o.type = *type;
  if (a.keep_type == "same") {
    o.keep_type.reset();
  } else {
    auto keep = weight_type(a.keep_type, "--keep-type");
    if (!keep) return fail(keep.status());
    o.keep_type = *keep;
  }
  o.threads = a.threads;
  std::unique_ptr<ProgressBar> bar;
  o.progress = [&](int64_t done, int64_t total) {
    if (!bar) bar = std::make_unique<ProgressBar>("quantizing", total);
    bar->advance();
    (void)done;
  };
  auto report = quantize_model(a.in, a.out, o);
  bar.reset();
  if (!report) return fail(report.status());
  std::printf(
      "wrote %s: %lld matrices as %s (%lld kept at %s for embeddings/output, %lld in a fallback type), "
      "%lld tensors copied; %.1f MiB -> %.1f MiB\n",
      a.out.c_str(), (long long)report->tensors_quantized, o.type.c_str(), (long long)(o.keep_type ? 2 : 0),
      o.keep_type ? o.keep_type->c_str() : "-", (long long)report->tensors_fallback, (long long)report->tensors_copied,
      double(report->bytes_in) / 1048576.0, double(report->bytes_out) / 1048576.0);
  return 0;
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("quantize", "Re-quantize a GGUF model's matrices (f32/f16/bf16/... to q8_0, q4_k ...)");
  auto a = std::make_shared<QuantizeArgs>();
  cmd->add_option("input", a->in, "Input GGUF file")->required();
  cmd->add_option("output", a->out, "Output GGUF file")->required();
  cmd->add_option("type", a->type, "q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k f16 bf16 f32")->required();
  cmd->add_option("--keep-type", a->keep_type, "Type of token_embd/output ('same': as the others)")
      ->capture_default_str();
  add_threads_option(*cmd, a->threads);
  cmd->callback([a] { exit_code() = quantize(*a); });
}

}  // namespace autoglm::cli
