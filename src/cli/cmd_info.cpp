// autoglm info: what a model file holds.
#include <cstdio>

#include "cli/common.h"
#include "core/cpu_features.h"
#include "formats/gguf.h"
#include "kernels/cpu/matmul.h"
#include "model/param_count.h"

namespace autoglm::cli {
namespace {

// Total and per-token parameters and weight bytes (see count_params for what a token counts).
void print_param_counts(const GgufFile& file) {
  const std::string arch = file.get_string("general.architecture").value_or("");
  const int64_t n_expert = file.get_int(arch + ".expert_count").value_or(0);
  const int64_t n_used = file.get_int(arch + ".expert_used_count").value_or(0);
  const ParamCount c = count_params(file, n_expert, n_used);
  if (n_expert > 0) std::printf("experts:         %lld, %lld used per token\n", (long long)n_expert, (long long)n_used);
  std::printf("active params:   %lld (%.2f M) per token, of %lld (%.2f M)\n", (long long)c.active_params,
              double(c.active_params) / 1e6, (long long)c.params, double(c.params) / 1e6);
  std::printf("bytes per token: %.2f MiB of weights read (embedding: one row)\n",
              double(c.active_bytes) / (1024.0 * 1024.0));
}

// What the file itself says, for a model the runtime cannot open (an architecture it lacks).
void print_file_summary(const std::string& path) {
  auto file = GgufFile::open(path);
  if (!file) return;
  std::printf("file:            %s (GGUF v%u)\n", path.c_str(), (*file)->version());
  std::printf("architecture:    %s\n", (*file)->get_string("general.architecture").value_or("-").c_str());
  print_param_counts(**file);
}

int info(const std::string& path) {
  RuntimeOptions options;
  options.start_engine = false;
  options.threads = 1;
  auto rt = open_runtime(path, options);
  if (!rt) {
    if (!is_hf_folder(path)) print_file_summary(path);
    return fail(rt.status());
  }
  const Model& m = *(*rt)->parts().model;
  const ModelSpec& s = m.spec();
  const Vocab& v = (*rt)->parts().tokenizer->vocab();
  const char* rope = s.rope_style == cpu::RopeStyle::kNeox ? "neox" : "normal";
  if (is_hf_folder(path))
    std::printf("file:            %s (Hugging Face folder)\n", path.c_str());
  else
    std::printf("file:            %s (GGUF v%u)\n", path.c_str(), m.file().version());
  std::printf("name:            %s\n", s.name.empty() ? "-" : s.name.c_str());
  std::printf("architecture:    %s\n", s.arch.c_str());
  std::printf("parameters:      %lld (%.2f M)\n", (long long)m.n_params(), double(m.n_params()) / 1e6);
  std::printf("size:            %.2f MiB\n", double(m.weight_bytes()) / (1024.0 * 1024.0));
  print_param_counts(m.file());
  std::printf("weight types:    %s\n", m.weight_type_summary().c_str());
  std::printf(
      "repacked:        %.2f MiB copied into the interleaved kernels' layout (AUTOGLM_REPACK=0: none; the "
      "rest is read where the file is mapped)\n",
      double(m.repacked_bytes()) / (1024.0 * 1024.0));
  std::printf("context length:  %lld\n", (long long)s.n_ctx_train);
  std::printf("embedding:       %lld\n", (long long)s.n_embd);
  std::printf("layers:          %lld\n", (long long)s.n_layer);
  std::printf("heads:           %lld (kv %lld), head size %lld (v %lld)\n", (long long)s.n_head, (long long)s.n_head_kv,
              (long long)s.head_dim, (long long)s.head_dim_v);
  std::printf("feed-forward:    %lld\n", (long long)s.n_ff);
  std::printf("rope:            %s, %lld dims, base %g, scale %g\n", rope, (long long)s.n_rot, s.rope_freq_base,
              s.rope_freq_scale);
  std::printf("rms eps:         %g\n", s.rms_eps);
  std::printf("switches:        qkv_bias=%d qk_norm=%d post_norms=%d tied_embeddings=%d rope_factors=%d\n", s.qkv_bias,
              s.qk_norm, s.post_norms, s.tied_embeddings, int(!s.rope_freq_factors.empty()));
  if (s.sliding_window > 0)
    std::printf("sliding window:  %lld%s\n", (long long)s.sliding_window,
                s.swa_even_layers ? " (layers 0, 2, 4, ...; the others see all)" : "");
  if (s.moe.enabled())
    std::printf(
        "experts:         ffn %lld each, shared ffn %lld, leading dense layers %lld, gating %s%s\n",
        (long long)s.moe.n_ff_exp, (long long)s.moe.n_ff_shexp, (long long)s.moe.n_leading_dense,
        s.moe.gating == ExpertGating::kSigmoid   ? "sigmoid"
        : s.moe.gating == ExpertGating::kSoftmax ? "softmax"
                                                 : "softmax over the chosen",
        s.moe.n_group > 1
            ? (", " + std::to_string(s.moe.n_group_used) + " of " + std::to_string(s.moe.n_group) + " groups").c_str()
            : "");
  if (s.mla.enabled())
    std::printf(
        "latent attention: q rank %lld, kv rank %lld, nope %lld + rope %lld per head, v %lld (cached: %lld per "
        "position)\n",
        (long long)s.mla.q_lora_rank, (long long)s.mla.kv_lora_rank, (long long)s.mla.qk_nope, (long long)s.n_rot,
        (long long)s.mla.v_head, (long long)(s.head_dim + s.head_dim_v));
  if (s.n_nextn > 0) std::printf("nextn layers:    %lld (not run for the logits)\n", (long long)s.n_nextn);
  std::printf("vocabulary:      %d tokens (%s%s%s), bos %d, eos %d\n", v.size(),
              v.kind == TokenizerKind::kSpm ? "spm" : "bpe", v.kind == TokenizerKind::kBpe ? ", pre " : "",
              v.kind == TokenizerKind::kBpe ? v.pre.c_str() : "", v.bos, v.eos);
  std::printf("chat template:   %s\n", v.chat_template.empty() ? "no" : "yes");
  std::printf("cpu kernels:     %s (%s)\n", cpu::kernel_isa(), cpu_features_string().c_str());
  std::printf("bf16 activations: %s\n",
              cpu::bf16_activations() ? "rounded to bf16 (--bf16-activations off: floats)" : "floats");
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
