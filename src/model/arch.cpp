#include "model/arch.h"

#include <algorithm>
#include <cmath>

namespace autoglm {
namespace {

// The switches each architecture turns on over the plain Llama decoder.
struct ArchTraits {
  std::string name;
  cpu::RopeStyle rope_style = cpu::RopeStyle::kAdjacentPairs;
  bool qkv_bias = false;
  bool qk_norm = false;
  bool post_norms = false;
  bool attn_sinks = false;
  bool swa_even_layers = false;
  FfnActivation activation = FfnActivation::kSiluGlu;
  ExpertGating gating = ExpertGating::kSoftmax;  // unless expert_gating_func says otherwise
  bool mla = false;
  bool shared_gate = false;
};

const std::vector<ArchTraits>& arch_table() {
  static const std::vector<ArchTraits> table = {
      {.name = "llama"},
      {.name = "mistral"},
      {.name = "qwen2", .rope_style = cpu::RopeStyle::kNeox, .qkv_bias = true},
      {.name = "qwen3", .rope_style = cpu::RopeStyle::kNeox, .qk_norm = true},
      // Qwen2-VL / Qwen2.5-VL's text model: qwen2 with M-RoPE (rope.dimension_sections).
      {.name = "qwen2vl", .rope_style = cpu::RopeStyle::kNeox, .qkv_bias = true},
      // GLM-4-9B / ChatGLM: fused [q; k; v] with bias, fused [gate; up], RoPE on the first n_rot dims.
      {.name = "chatglm", .qkv_bias = true},
      // GLM-4-0414: RMSNorm of the attention and MLP outputs too.
      {.name = "glm4", .post_norms = true},
      // Mixture-of-experts families: the experts come from expert_count and friends.
      {.name = "qwen3moe", .rope_style = cpu::RopeStyle::kNeox, .qk_norm = true},
      {.name = "qwen2moe", .rope_style = cpu::RopeStyle::kNeox, .qkv_bias = true, .shared_gate = true},
      // GLM-4.5/4.6/4.7: q/k norms only where the file has them.
      {.name = "glm4moe", .rope_style = cpu::RopeStyle::kNeox, .qkv_bias = true, .gating = ExpertGating::kSigmoid},
      {.name = "gpt-oss",
       .rope_style = cpu::RopeStyle::kNeox,
       .qkv_bias = true,
       .attn_sinks = true,
       .swa_even_layers = true,
       .activation = FfnActivation::kClampedSwiglu,
       .gating = ExpertGating::kSoftmaxSelected},
      // DeepSeek-V2/V3 and GLM-4.7-Flash: multi-head latent attention.
      {.name = "deepseek2", .gating = ExpertGating::kSoftmax, .mla = true},
  };
  return table;
}

Result<int64_t> required_int(const GgufFile& f, const std::string& key) {
  auto v = f.get_int(key);
  if (!v) return corrupt(f.path() + ": missing or non-integer metadata key '" + key + "'");
  if (*v <= 0) return corrupt(f.path() + ": metadata key '" + key + "' must be positive, found " + std::to_string(*v));
  return *v;
}

// expert_count and the keys that go with it; absent: a dense model.
Status read_moe(const GgufFile& f, const std::string& p, ModelSpec& s) {
  MoeSpec& m = s.moe;
  m.n_expert = f.get_int(p + "expert_count").value_or(0);
  if (m.n_expert == 0) return Status::ok();
  auto bad = [&](const std::string& key, const std::string& why) {
    return corrupt(f.path() + ": metadata key '" + p + key + "' " + why);
  };
  if (m.n_expert < 0 || m.n_expert > 4096) return bad("expert_count", "must be in [1, 4096]");
  AUTOGLM_ASSIGN_OR_RETURN(m.n_expert_used, required_int(f, p + "expert_used_count"));
  if (m.n_expert_used > m.n_expert)
    return bad("expert_used_count",
               "is " + std::to_string(m.n_expert_used) + ", more than expert_count " + std::to_string(m.n_expert));
  if (auto n = f.get_int(p + "expert_feed_forward_length")) {
    m.n_ff_exp = *n;
  } else {
    AUTOGLM_ASSIGN_OR_RETURN(m.n_ff_exp, required_int(f, p + "feed_forward_length"));  // Mixtral
  }
  if (m.n_ff_exp <= 0) return bad("expert_feed_forward_length", "must be positive");
  const int64_t n_shared = f.get_int(p + "expert_shared_count").value_or(0);
  if (n_shared < 0) return bad("expert_shared_count", "must not be negative");
  m.n_ff_shexp = f.get_int(p + "expert_shared_feed_forward_length").value_or(n_shared * m.n_ff_exp);
  m.n_leading_dense = f.get_int(p + "leading_dense_block_count").value_or(0);
  if (m.n_leading_dense < 0) return bad("leading_dense_block_count", "must not be negative");
  if (auto func = f.get_int(p + "expert_gating_func")) {
    if (*func == 1)
      m.gating = ExpertGating::kSoftmax;
    else if (*func == 2)
      m.gating = ExpertGating::kSigmoid;
    else
      return bad("expert_gating_func", "is " + std::to_string(*func) + " (1 softmax and 2 sigmoid are known)");
  }
  m.weights_scale = float(f.get_float(p + "expert_weights_scale").value_or(1.0));
  // qwen3moe and Mixtral always renormalize; the keyed families say so.
  m.norm_weights = f.get_bool(p + "expert_weights_norm").value_or(s.arch != "qwen2moe" && s.arch != "deepseek2");
  m.n_group = f.get_int(p + "expert_group_count").value_or(0);
  m.n_group_used = f.get_int(p + "expert_group_used_count").value_or(0);
  if (m.n_group > 1 && (m.n_expert % m.n_group != 0 || m.n_group_used <= 0 || m.n_group_used > m.n_group))
    return bad("expert_group_count", "is " + std::to_string(m.n_group) +
                                         "; it must divide expert_count and be at least expert_group_used_count");
  // The chosen groups must hold enough experts for the top-k.
  if (m.n_group > 1 && m.n_group_used * (m.n_expert / m.n_group) < m.n_expert_used)
    return bad("expert_group_used_count", "is " + std::to_string(m.n_group_used) + ": its groups hold " +
                                              std::to_string(m.n_group_used * (m.n_expert / m.n_group)) +
                                              " experts, fewer than expert_used_count");
  return Status::ok();
}

// The latent attention's ranks; the cached head is [latent | rope key].
Status read_mla(const GgufFile& f, const std::string& p, ModelSpec& s) {
  MlaSpec& m = s.mla;
  m.q_lora_rank = f.get_int(p + "attention.q_lora_rank").value_or(0);
  AUTOGLM_ASSIGN_OR_RETURN(m.kv_lora_rank, required_int(f, p + "attention.kv_lora_rank"));
  // Files written for MLA say the per-head sizes under *_mla; older ones in key/value_length.
  const int64_t key_mla = f.get_int(p + "attention.key_length_mla").value_or(s.head_dim);
  m.v_head = f.get_int(p + "attention.value_length_mla").value_or(s.head_dim_v);
  m.qk_nope = key_mla - s.n_rot;
  if (m.qk_nope <= 0 || m.v_head <= 0)
    return corrupt(f.path() + ": metadata key '" + p + "attention.key_length_mla' (" + std::to_string(key_mla) +
                   ") must exceed rope.dimension_count (" + std::to_string(s.n_rot) + ")");
  s.attn_scale = 1.0f / std::sqrt(float(key_mla));
  // The cache holds one shared head: keys [latent | rope part], values the latent.
  s.n_head_kv = 1;
  s.head_dim = m.kv_lora_rank + s.n_rot;
  s.head_dim_v = m.kv_lora_rank;
  return Status::ok();
}

Status read_yarn(const GgufFile& f, const std::string& p, ModelSpec& s) {
  const double factor = f.get_float(p + "rope.scaling.factor").value_or(1.0);
  if (!(factor >= 1.0)) return corrupt(f.path() + ": rope.scaling.factor must be at least 1 for yarn");
  auto orig = f.get_int(p + "rope.scaling.original_context_length");
  if (!orig || *orig <= 0) return corrupt(f.path() + ": yarn needs a positive 'rope.scaling.original_context_length'");
  s.rope_freq_scale = float(1.0 / factor);
  s.yarn_orig_ctx = *orig;
  s.yarn_beta_fast = float(f.get_float(p + "rope.scaling.yarn_beta_fast").value_or(32.0));
  s.yarn_beta_slow = float(f.get_float(p + "rope.scaling.yarn_beta_slow").value_or(1.0));
  const double attn_factor = f.get_float(p + "rope.scaling.attn_factor").value_or(1.0);
  s.rope_mscale = float(attn_factor * (1.0 + 0.1 * std::log(factor)));
  if (s.mla.enabled()) {
    // DeepSeek's YaRN leaves cos and sin alone and scales q.k by mscale^2 instead, with
    // mscale = 1 + yarn_log_multiplier * ln(factor) (the key holds 0.1 * mscale_all_dim).
    const double log_mul = f.get_float(p + "rope.scaling.yarn_log_multiplier").value_or(0.0);
    const double mscale = attn_factor * (1.0 + log_mul * std::log(factor));
    s.rope_mscale = float(attn_factor);
    s.attn_scale = float(double(s.attn_scale) * mscale * mscale);
  }
  return Status::ok();
}

// rope.dimension_sections (M-RoPE): [t, h, w, e] pair counts; llama.cpp's M-RoPE rotates the
// pairs (i, i + n_rot/2), so a file that has them is NeoX-style whatever its architecture
// (its converter reorders GLM-4.1V's q/k rows so).
Status read_rope_sections(const GgufFile& f, const std::string& p, ModelSpec& s) {
  const GgufValue* v = f.find(p + "rope.dimension_sections");
  if (!v) {
    if (s.arch == "qwen2vl") return corrupt(f.path() + ": missing metadata key '" + p + "rope.dimension_sections'");
    return Status::ok();
  }
  const auto bad = [&](const std::string& why) {
    return corrupt(f.path() + ": metadata key '" + p + "rope.dimension_sections' " + why);
  };
  if (v->type != GgufValueType::kArray || v->ints.size() < 3 || v->ints.size() > 4)
    return bad("must be an array of 3 or 4 integers");
  for (size_t i = 0; i < v->ints.size(); ++i)
    if (v->ints[i] < 0 || v->ints[i] > 4096) return bad("holds " + std::to_string(v->ints[i]));
  if (v->ints.size() == 4 && v->ints[3] != 0) return bad("has a fourth section, which no supported model uses");
  if (v->ints[0] == 0 || v->ints[1] == 0) return Status::ok();  // llama.cpp: no M-RoPE
  const int64_t sum = v->ints[0] + v->ints[1] + v->ints[2];
  if (sum != s.n_rot / 2)
    return bad("sums to " + std::to_string(sum) + ", not n_rot / 2 = " + std::to_string(s.n_rot / 2));
  s.rope_sections = {int32_t(v->ints[0]), int32_t(v->ints[1]), int32_t(v->ints[2])};
  s.rope_style = cpu::RopeStyle::kNeox;
  return Status::ok();
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
  s.attn_sinks = it->attn_sinks;
  s.swa_even_layers = it->swa_even_layers;
  s.activation = it->activation;
  s.moe.gating = it->gating;
  s.moe.shared_gate = it->shared_gate;

  const std::string p = *arch + ".";
  AUTOGLM_ASSIGN_OR_RETURN(s.n_embd, required_int(f, p + "embedding_length"));
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t block_count, required_int(f, p + "block_count"));
  s.n_nextn = f.get_int(p + "nextn_predict_layers").value_or(0);
  if (s.n_nextn < 0 || s.n_nextn >= block_count)
    return corrupt(f.path() + ": metadata key '" + p + "nextn_predict_layers' (" + std::to_string(s.n_nextn) +
                   ") must be below block_count (" + std::to_string(block_count) + ")");
  s.n_layer = block_count - s.n_nextn;
  AUTOGLM_ASSIGN_OR_RETURN(s.n_head, required_int(f, p + "attention.head_count"));
  AUTOGLM_RETURN_IF_ERROR(read_moe(f, p, s));
  if (s.moe.enabled() && s.moe.n_leading_dense == 0) {
    s.n_ff = f.get_int(p + "feed_forward_length").value_or(s.moe.n_ff_exp);  // no dense layer needs it
  } else {
    AUTOGLM_ASSIGN_OR_RETURN(s.n_ff, required_int(f, p + "feed_forward_length"));
  }
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

  if (it->mla) AUTOGLM_RETURN_IF_ERROR(read_mla(f, p, s));
  AUTOGLM_RETURN_IF_ERROR(read_rope_sections(f, p, s));
  const auto scaling = f.get_string(p + "rope.scaling.type").value_or("none");
  if (scaling == "yarn") {
    AUTOGLM_RETURN_IF_ERROR(read_yarn(f, p, s));
  } else if (scaling == "linear") {
    const double factor = f.get_float(p + "rope.scaling.factor").value_or(1.0);
    if (!(factor > 0)) return corrupt(f.path() + ": rope.scaling.factor must be positive");
    s.rope_freq_scale = float(1.0 / factor);
  } else if (scaling != "none") {
    return unsupported(f.path() + ": rope.scaling.type '" + scaling + "' is not supported (none, linear, yarn)");
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
  if (s.moe.enabled() && (s.moe.n_expert_used <= 0 || s.moe.n_leading_dense > s.n_layer))
    return bad("expert_used_count must be positive and leading_dense_block_count at most block_count");
  return Status::ok();
}

}  // namespace autoglm
