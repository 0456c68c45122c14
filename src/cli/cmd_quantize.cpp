// autoglm quantize: re-encode a GGUF model's matrices, by one of llama-quantize's mixes
// (Q4_K_M, Q3_K_S, IQ4_XS, ...) or in one type for all (--pure).
#include <cstdio>

#include "autoglm/model_tools.h"
#include "cli/common.h"
#include "cli/progress.h"

namespace autoglm::cli {
namespace {

struct QuantizeArgs {
  std::string in, out, type, keep_type, output_type, embedding_type, imatrix;
  bool pure = false, leave_output = false;
  int threads = 0;
};

// The canonical name ("Q4_K") of the type called `name`; an error names the argument.
Result<std::string> weight_type(const std::string& name, const char* what) {
  auto t = weight_type_name(name);
  if (!t) return invalid_argument(std::string(what) + " '" + name + "' is not a weight type");
  return t;
}

// An optional type flag: unset when empty, else its canonical name.
Status set_type(const std::string& value, const char* flag, std::optional<std::string>& out) {
  if (value.empty()) return Status::ok();
  auto t = weight_type(value, flag);
  if (!t) return t.status();
  out = *t;
  return Status::ok();
}

std::string type_counts(const QuantizeModelReport& r) {
  std::string s;
  for (const auto& [type, n] : r.types) s += (s.empty() ? "" : ", ") + type + " x" + std::to_string(n);
  return s.empty() ? "none" : s;
}

int quantize(const QuantizeArgs& a) {
  if (!is_quantize_mix(a.type))
    if (auto t = weight_type(a.type, "TYPE"); !t) return fail(t.status());
  QuantizeModelOptions o;
  o.type = a.type;
  o.pure = a.pure;
  for (const auto& [value, flag, out] :
       {std::tuple{&a.keep_type, "--keep-type", &o.keep_type},
        std::tuple{&a.output_type, "--output-tensor-type", &o.output_tensor_type},
        std::tuple{&a.embedding_type, "--token-embedding-type", &o.token_embedding_type}})
    if (auto s = set_type(*value, flag, *out); !s) return fail(s);
  o.leave_output_tensor = a.leave_output;
  o.imatrix = a.imatrix;
  o.threads = a.threads;
  std::unique_ptr<ProgressBar> bar;
  o.progress = [&](int64_t, int64_t total) {
    if (!bar) bar = std::make_unique<ProgressBar>("quantizing", total);
    bar->advance();
  };
  auto report = quantize_model(a.in, a.out, o);
  bar.reset();
  if (!report) return fail(report.status());
  std::printf(
      "wrote %s (%s): %lld matrices quantized (%s), %lld in a fallback type, %lld tensors copied; "
      "%.2f MiB -> %.2f MiB\n",
      a.out.c_str(), report->mix.empty() ? ("every matrix " + a.type).c_str() : (report->mix + " mix").c_str(),
      (long long)report->tensors_quantized, type_counts(*report).c_str(), (long long)report->tensors_fallback,
      (long long)report->tensors_copied, double(report->bytes_in) / 1048576.0, double(report->bytes_out) / 1048576.0);
  return 0;
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "quantize", "Re-quantize a GGUF model: llama-quantize's mixes (Q4_K_M, Q3_K_S, IQ4_XS ...) or one type");
  auto a = std::make_shared<QuantizeArgs>();
  cmd->add_option("input", a->in, "Input GGUF file")->required();
  cmd->add_option("output", a->out, "Output GGUF file")->required();
  cmd->add_option("type", a->type,
                  "A mix as llama-quantize names it: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q2_K_S Q3_K_S Q3_K_M Q3_K_L Q4_K_S "
                  "Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS IQ3_M IQ3_S IQ3_XS IQ3_XXS IQ2_M IQ2_S IQ2_XS IQ2_XXS IQ1_M "
                  "IQ1_S TQ1_0 TQ2_0 MXFP4_MOE F16 BF16 F32 (Q3_K, Q4_K, Q5_K: the _M mixes; IQ2/IQ1 and Q2_K_S need "
                  "--imatrix); with --pure any weight type")
      ->required();
  cmd->add_flag("--pure", a->pure, "Every matrix in TYPE (no mix rules); embeddings and output at --keep-type");
  cmd->add_option("--keep-type", a->keep_type, "Type of token_embd and output (default: as the mix, or TYPE)");
  cmd->add_option("--output-tensor-type", a->output_type, "Type of output.weight");
  cmd->add_option("--token-embedding-type", a->embedding_type, "Type of token_embd.weight");
  cmd->add_flag("--leave-output-tensor", a->leave_output, "Copy output.weight as it is");
  cmd->add_option("--imatrix", a->imatrix,
                  "Importance matrix (autoglm imatrix or llama-imatrix, GGUF or .dat): weighs each column's error");
  add_threads_option(*cmd, a->threads);
  cmd->callback([a] { exit_code() = quantize(*a); });
}

}  // namespace autoglm::cli
