#include "runtime/model_description.h"

#include <cstdarg>
#include <cstdio>

#include "autoglm/runtime.h"
#include "core/cpu_features.h"
#include "formats/gguf.h"
#include "kernels/cpu/matmul.h"
#include "model/hf_checkpoint.h"
#include "model/param_count.h"

namespace autoglm {
namespace {

// printf onto a string.
[[gnu::format(printf, 2, 3)]] void add(std::string& out, const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (n > 0) {
    const size_t at = out.size();
    out.resize(at + size_t(n) + 1);
    std::vsnprintf(out.data() + at, size_t(n) + 1, format, again);
    out.resize(at + size_t(n));
  }
  va_end(again);
}

// Total and per-token parameters and weight bytes (see count_params for what a token counts).
void add_param_counts(std::string& out, const GgufFile& file) {
  const std::string arch = file.get_string("general.architecture").value_or("");
  const int64_t n_expert = file.get_int(arch + ".expert_count").value_or(0);
  const int64_t n_used = file.get_int(arch + ".expert_used_count").value_or(0);
  const ParamCount c = count_params(file, n_expert, n_used);
  if (n_expert > 0) add(out, "experts:         %lld, %lld used per token\n", (long long)n_expert, (long long)n_used);
  add(out, "active params:   %lld (%.2f M) per token, of %lld (%.2f M)\n", (long long)c.active_params,
      double(c.active_params) / 1e6, (long long)c.params, double(c.params) / 1e6);
  add(out, "bytes per token: %.2f MiB of weights read (embedding: one row)\n",
      double(c.active_bytes) / (1024.0 * 1024.0));
}

}  // namespace

std::string describe_model(const std::string& path, const Model& m, const Vocab& v) {
  std::string out;
  const ModelSpec& s = m.spec();
  const char* rope = s.rope_style == cpu::RopeStyle::kNeox ? "neox" : "normal";
  if (is_hf_folder(path))
    add(out, "file:            %s (Hugging Face folder)\n", path.c_str());
  else
    add(out, "file:            %s (GGUF v%u)\n", path.c_str(), m.file().version());
  add(out, "name:            %s\n", s.name.empty() ? "-" : s.name.c_str());
  add(out, "architecture:    %s\n", s.arch.c_str());
  add(out, "parameters:      %lld (%.2f M)\n", (long long)m.n_params(), double(m.n_params()) / 1e6);
  add(out, "size:            %.2f MiB\n", double(m.weight_bytes()) / (1024.0 * 1024.0));
  add_param_counts(out, m.file());
  add(out, "weight types:    %s\n", m.weight_type_summary().c_str());
  add(out,
      "repacked:        %.2f MiB copied into the interleaved kernels' layout (AUTOGLM_REPACK=0: none; the "
      "rest is read where the file is mapped)\n",
      double(m.repacked_bytes()) / (1024.0 * 1024.0));
  add(out, "context length:  %lld\n", (long long)s.n_ctx_train);
  add(out, "embedding:       %lld\n", (long long)s.n_embd);
  add(out, "layers:          %lld\n", (long long)s.n_layer);
  add(out, "heads:           %lld (kv %lld), head size %lld (v %lld)\n", (long long)s.n_head, (long long)s.n_head_kv,
      (long long)s.head_dim, (long long)s.head_dim_v);
  add(out, "feed-forward:    %lld\n", (long long)s.n_ff);
  add(out, "rope:            %s, %lld dims, base %g, scale %g\n", rope, (long long)s.n_rot, s.rope_freq_base,
      s.rope_freq_scale);
  if (s.mrope())
    add(out, "m-rope:          sections t %d, h %d, w %d (pairs of the rotated dims)\n", s.rope_sections[0],
        s.rope_sections[1], s.rope_sections[2]);
  add(out, "rms eps:         %g\n", s.rms_eps);
  add(out, "switches:        qkv_bias=%d qk_norm=%d post_norms=%d tied_embeddings=%d rope_factors=%d\n", s.qkv_bias,
      s.qk_norm, s.post_norms, s.tied_embeddings, int(!s.rope_freq_factors.empty()));
  if (s.sliding_window > 0)
    add(out, "sliding window:  %lld%s\n", (long long)s.sliding_window,
        s.swa_even_layers ? " (layers 0, 2, 4, ...; the others see all)" : "");
  if (s.moe.enabled())
    add(out, "experts:         ffn %lld each, shared ffn %lld, leading dense layers %lld, gating %s%s\n",
        (long long)s.moe.n_ff_exp, (long long)s.moe.n_ff_shexp, (long long)s.moe.n_leading_dense,
        s.moe.gating == ExpertGating::kSigmoid   ? "sigmoid"
        : s.moe.gating == ExpertGating::kSoftmax ? "softmax"
                                                 : "softmax over the chosen",
        s.moe.n_group > 1
            ? (", " + std::to_string(s.moe.n_group_used) + " of " + std::to_string(s.moe.n_group) + " groups").c_str()
            : "");
  if (s.mla.enabled())
    add(out,
        "latent attention: q rank %lld, kv rank %lld, nope %lld + rope %lld per head, v %lld (cached: %lld per "
        "position)\n",
        (long long)s.mla.q_lora_rank, (long long)s.mla.kv_lora_rank, (long long)s.mla.qk_nope, (long long)s.n_rot,
        (long long)s.mla.v_head, (long long)(s.head_dim + s.head_dim_v));
  if (s.n_nextn > 0) add(out, "nextn layers:    %lld (not run for the logits)\n", (long long)s.n_nextn);
  add(out, "vocabulary:      %d tokens (%s%s%s), bos %d, eos %d\n", v.size(),
      v.kind == TokenizerKind::kSpm ? "spm" : "bpe", v.kind == TokenizerKind::kBpe ? ", pre " : "",
      v.kind == TokenizerKind::kBpe ? v.pre.c_str() : "", v.bos, v.eos);
  add(out, "chat template:   %s\n", v.chat_template.empty() ? "no" : "yes");
  add(out, "cpu kernels:     %s (%s)\n", cpu::kernel_isa(), cpu_features_string().c_str());
  add(out, "bf16 activations: %s\n",
      cpu::bf16_activations() ? "rounded to bf16 (--bf16-activations off: floats)" : "floats");
  return out;
}

std::string describe_projector(const std::string& path, const VisionModel& vision) {
  std::string out;
  const VisionSpec& v = vision.spec();
  const VisionPreprocess& p = v.preprocess;
  add(out, "projector:       %s (%s, %s)\n", path.c_str(), projector_type_name(v.projector),
      projector_display_name(v.projector));
  add(out, "vision tower:    %lld layers, width %lld, %lld heads of %lld, ffn %lld, %lld params\n",
      (long long)v.n_layer, (long long)v.n_embd, (long long)v.n_head, (long long)v.head_dim, (long long)v.n_ff,
      (long long)vision.n_params());
  if (v.window_units > 0)
    add(out, "vision attention: windows of %lldx%lld patches; whole image every %lld layers\n",
        (long long)(v.window_units * v.merge()), (long long)(v.window_units * v.merge()), (long long)v.full_every);
  add(out, "image tokens:    patch %d, 2x2 merged into tokens of %lld; pixels %lld..%lld%s\n", p.patch_size,
      (long long)v.n_out, (long long)p.min_pixels, (long long)p.max_pixels,
      p.limits_count_frames ? " (x2 frames, as GLM-4.1V counts)" : "");
  const auto screen = smart_resize(2400, 1080, p);
  if (screen)
    add(out, "a 1080x2400 screenshot: resized to %dx%d, %lld image tokens\n", screen->width, screen->height,
        (long long)(screen->height / (p.patch_size * 2)) * (screen->width / (p.patch_size * 2)));
  return out;
}

// What the file itself says, for a model the runtime cannot open (an architecture it lacks).
std::string describe_model_file(const std::string& path) {
  std::string out;
  auto file = GgufFile::open(path);
  if (!file) return out;
  add(out, "file:            %s (GGUF v%u)\n", path.c_str(), (*file)->version());
  add(out, "architecture:    %s\n", (*file)->get_string("general.architecture").value_or("-").c_str());
  add_param_counts(out, **file);
  return out;
}

}  // namespace autoglm
