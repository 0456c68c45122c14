#include "model/arch.h"

#include <algorithm>

namespace autoglm {
namespace {

// The switches each architecture turns on over the plain Llama decoder.
struct ArchTraits {
  std::string name;
  cpu::RopeStyle rope_style = cpu::RopeStyle::kAdjacentPairs;
  bool qkv_bias = false;
  bool qk_norm = false;
  bool post_norms = false;
};

const std::vector<ArchTraits>& arch_table() {
  static const std::vector<ArchTraits> table = {
      {.name = "llama"},
      {.name = "mistral"},
      {.name = "qwen2", .rope_style = cpu::RopeStyle::kNeox, .qkv_bias = true},
      {.name = "qwen3", .rope_style = cpu::RopeStyle::kNeox, .qk_norm = true},
      // GLM-4-9B / ChatGLM: fused [q; k; v] with bias, fused [gate; up], RoPE on the first n_rot dims.
      {.name = "chatglm", .qkv_bias = true},
      // GLM-4-0414: RMSNorm of the attention and MLP outputs too.
      {.name = "glm4", .post_norms = true},
  };
  return table;
}

Result<int64_t> required_int(const GgufFile& f, const std::string& key) {
  auto v = f.get_int(key);
  if (!v) return corrupt(f.path() + ": missing or non-integer metadata key '" + key + "'");
  if (*v <= 0) return corrupt(f.path() + ": metadata key '" + key + "' must be positive, found " + std::to_string(*v));
  return *v;
}

}  // namespace

const std::vector<std::string>& supported_architectures() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& a : arch_table()) n.push_back(a.name);
    return n;
  }();
  return names;
}

Result<ModelSpec> spec_from_gguf(const GgufFile& f, const std::string& arch_override) {
  ModelSpec s;
  auto arch = f.get_string("general.architecture");
  if (!arch) return corrupt(f.path() + ": missing metadata key 'general.architecture'");
  const std::string wanted = arch_override.empty() ? *arch : arch_override;
  const auto& table = arch_table();
  auto it = std::find_if(table.begin(), table.end(), [&](const ArchTraits& a) { return a.name == wanted; });
  if (it == table.end()) {
    std::string list;
    for (const auto& a : table) list += (list.empty() ? "" : ", ") + a.name;
    return unsupported(f.path() + ": architecture '" + wanted + "' is not supported (supported: " + list + ")");
  }
  s.arch = wanted;
  s.name = f.get_string("general.name").value_or("");
  s.rope_style = it->rope_style;
  s.qkv_bias = it->qkv_bias;
  s.qk_norm = it->qk_norm;
  s.post_norms = it->post_norms;

  const std::string p = *arch + ".";
  AUTOGLM_ASSIGN_OR_RETURN(s.n_embd, required_int(f, p + "embedding_length"));
  AUTOGLM_ASSIGN_OR_RETURN(s.n_layer, required_int(f, p + "block_count"));
  AUTOGLM_ASSIGN_OR_RETURN(s.n_head, required_int(f, p + "attention.head_count"));
  AUTOGLM_ASSIGN_OR_RETURN(s.n_ff, required_int(f, p + "feed_forward_length"));
  s.n_ctx_train = f.get_int(p + "context_length").value_or(2048);
  s.n_head_kv = f.get_int(p + "attention.head_count_kv").value_or(s.n_head);
  if (s.n_embd % s.n_head != 0 && !f.get_int(p + "attention.key_length"))
    return corrupt(f.path() + ": embedding_length " + std::to_string(s.n_embd) + " is not a multiple of head_count " +
                   std::to_string(s.n_head) + " and no attention.key_length is given");
  s.head_dim = f.get_int(p + "attention.key_length").value_or(s.n_embd / s.n_head);
  s.head_dim_v = f.get_int(p + "attention.value_length").value_or(s.head_dim);
  s.n_rot = f.get_int(p + "rope.dimension_count").value_or(s.head_dim);
  s.rope_freq_base = float(f.get_float(p + "rope.freq_base").value_or(10000.0));
  s.rms_eps = float(f.get_float(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  s.n_vocab = f.get_int(p + "vocab_size").value_or(0);
  s.sliding_window = f.get_int(p + "attention.sliding_window").value_or(0);
  if (s.sliding_window < 0) return corrupt(f.path() + ": attention.sliding_window must not be negative");

  const auto scaling = f.get_string(p + "rope.scaling.type").value_or("none");
  if (scaling == "linear") {
    const double factor = f.get_float(p + "rope.scaling.factor").value_or(1.0);
    if (!(factor > 0)) return corrupt(f.path() + ": rope.scaling.factor must be positive");
    s.rope_freq_scale = float(1.0 / factor);
  } else if (scaling != "none") {
    return unsupported(f.path() + ": rope.scaling.type '" + scaling + "' is not supported (none, linear)");
  } else if (auto scale = f.get_float(p + "rope.scale_linear")) {
    if (!(*scale > 0)) return corrupt(f.path() + ": rope.scale_linear must be positive");
    s.rope_freq_scale = float(1.0 / *scale);
  }
  AUTOGLM_RETURN_IF_ERROR(validate_spec(s, f.path()));
  return s;
}

Status validate_spec(const ModelSpec& s, const std::string& where) {
  auto bad = [&](const std::string& m) { return corrupt(where + ": " + m); };
  if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_ff <= 0) return bad("model sizes must be positive");
  if (s.n_embd > (1 << 20) || s.n_layer > 4096 || s.n_head > 4096 || s.n_ff > (1 << 22))
    return bad("model sizes are implausibly large");
  if (s.n_head_kv <= 0 || s.n_head % s.n_head_kv != 0)
    return bad("head_count " + std::to_string(s.n_head) + " is not a multiple of head_count_kv " +
               std::to_string(s.n_head_kv));
  if (s.head_dim <= 0 || s.head_dim > 4096 || s.head_dim_v <= 0 || s.head_dim_v > 4096) return bad("bad head size");
  if (s.n_rot <= 0 || s.n_rot > s.head_dim || s.n_rot % 2 != 0)
    return bad("rope.dimension_count " + std::to_string(s.n_rot) + " must be even and at most the head size " +
               std::to_string(s.head_dim));
  if (!(s.rms_eps > 0)) return bad("layer_norm_rms_epsilon must be positive");
  if (!(s.rope_freq_base > 0)) return bad("rope.freq_base must be positive");
  return Status::ok();
}

}  // namespace autoglm
