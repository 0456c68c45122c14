#include "model/create_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "kernels/ref/quants.h"
#include "model/create_vision_model.h"
#include "model/random_tensors.h"
#include "tokenizer/vocab.h"

namespace autoglm {
namespace {

const std::vector<ModelPreset>& dense_presets() {
  // 1b is TinyLlama-1.1B's shape.
  static const std::vector<ModelPreset> p = {
      {"tiny", 256, 2, 4, 2, 64, 512, 2048, 2048},
      {"150m", 768, 12, 12, 4, 64, 2816, 32000, 2048},
      {"1b", 2048, 22, 32, 4, 64, 5632, 32000, 2048},
  };
  return p;
}

const std::vector<ModelPreset>& moe_presets() {
  // 30b-a3b is Qwen3-30B-A3B's width (n_ff: the dense layers of glm4moe and deepseek2); the MLA
  // ranks are DeepSeek-V3's, scaled to it.
  static const std::vector<ModelPreset> p = {
      {"tiny", 256, 4, 4, 2, 64, 512, 2048, 2048, 8, 2, 256, 256, 256, 32, 64, 64},
      {"30b-a3b", 2048, 48, 32, 4, 128, 6144, 151936, 40960, 128, 8, 768, 768, 512, 64, 128, 128},
  };
  return p;
}

// What an architecture's blocks hold, beyond attention and an FFN.
struct ArchTraits {
  std::string name;
  bool moe = false;
  bool qkv_bias = false;
  bool qk_norm = false;
  bool ffn_post_attention_norm = false;  // the FFN's input norm is post_attention_norm (not ffn_norm)
  bool gpt_oss = false;                  // attention sinks, o bias, router and expert biases
  bool probs_bias = false;               // exp_probs_b.bias (sigmoid routing)
  bool shared_expert = false;            // one ffn_*_shexp expert
  bool leading_dense = false;            // block 0 has a dense FFN
  bool mla = false;                      // deepseek2's multi-head latent attention
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
};

const std::vector<ArchTraits>& arch_traits() {
  static const std::vector<ArchTraits> a = [] {
    std::vector<ArchTraits> v(7);
    v[0].name = "llama";
    v[1].name = "qwen2", v[1].qkv_bias = true, v[1].rope_base = 1e6f;
    v[2].name = "qwen3", v[2].qk_norm = true, v[2].rope_base = 1e6f;
    v[3].name = "qwen3moe", v[3].moe = v[3].qk_norm = true, v[3].rope_base = 1e6f, v[3].rms_eps = 1e-6f;
    v[4].name = "glm4moe", v[4].moe = v[4].qkv_bias = v[4].ffn_post_attention_norm = true;
    v[4].probs_bias = v[4].shared_expert = v[4].leading_dense = true, v[4].rope_base = 1e6f;
    v[5].name = "gpt-oss", v[5].moe = v[5].qkv_bias = v[5].ffn_post_attention_norm = v[5].gpt_oss = true;
    v[5].rope_base = 150000.0f;
    v[6].name = "deepseek2", v[6].moe = v[6].probs_bias = v[6].shared_expert = v[6].leading_dense = true;
    v[6].mla = true;
    return v;
  }();
  return a;
}

std::string names_of(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

Result<ArchTraits> find_arch(const std::string& arch) {
  for (const auto& a : arch_traits())
    if (a.name == arch) return a;
  return invalid_argument("--arch '" + arch + "' is not one of " + names_of(create_model_archs()));
}

Result<ModelPreset> find_preset(const ArchTraits& arch, const std::string& name) {
  const auto& table = arch.moe ? moe_presets() : dense_presets();
  std::vector<std::string> names;
  for (const auto& p : table) {
    if (p.name == name) return p;
    names.push_back(p.name);
  }
  return invalid_argument("--preset '" + name + "' is not one of " + names_of(names) + " (for --arch " + arch.name +
                          ")");
}

// The type of gpt-oss's expert matrices: MXFP4, as the model ships, where this build has it.
std::optional<DType> gpt_oss_expert_type() {
  const auto t = dtype_from_name("mxfp4");
  if (t && ref::dtype_can_quantize(*t)) return t;
  return std::nullopt;
}

void set_u32(GgufWriter& w, const std::string& key, int64_t v) {
  w.set(key, GgufValue::u32(uint32_t(v)));
}

// Keys every architecture has, under "<arch>.".
void add_common_keys(GgufWriter& w, const ArchTraits& arch, const ModelPreset& p) {
  const std::string a = arch.name + ".";
  set_u32(w, a + "context_length", p.n_ctx);
  set_u32(w, a + "embedding_length", p.n_embd);
  set_u32(w, a + "block_count", p.n_layer);
  set_u32(w, a + "feed_forward_length", arch.gpt_oss ? p.n_ff_exp : p.n_ff);
  set_u32(w, a + "attention.head_count", p.n_head);
  set_u32(w, a + "attention.head_count_kv", arch.mla ? 1 : p.n_head_kv);
  w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::f32(arch.rms_eps));
  w.set(a + "rope.freq_base", GgufValue::f32(arch.rope_base));
  if (arch.name == "llama" || arch.name == "qwen2" || arch.name == "qwen3") {
    // The dense presets' keys, as they always were.
    set_u32(w, a + "rope.dimension_count", p.head_dim);
    if (arch.name == "qwen3") {
      set_u32(w, a + "attention.key_length", p.head_dim);
      set_u32(w, a + "attention.value_length", p.head_dim);
    }
    return;
  }
  if (!arch.mla) {
    set_u32(w, a + "attention.key_length", p.head_dim);
    set_u32(w, a + "attention.value_length", p.head_dim);
    // glm4moe rotates half of each head (partial rotary).
    set_u32(w, a + "rope.dimension_count", arch.name == "glm4moe" ? p.head_dim / 2 : p.head_dim);
  }
}

void add_moe_keys(GgufWriter& w, const ArchTraits& arch, const ModelPreset& p) {
  const std::string a = arch.name + ".";
  set_u32(w, a + "expert_count", p.n_expert);
  set_u32(w, a + "expert_used_count", p.n_expert_used);
  set_u32(w, a + "expert_feed_forward_length", p.n_ff_exp);
  if (arch.shared_expert) set_u32(w, a + "expert_shared_count", 1);
  if (arch.leading_dense) set_u32(w, a + "leading_dense_block_count", 1);
  if (arch.probs_bias) {
    set_u32(w, a + "expert_gating_func", 2);  // sigmoid
    w.set(a + "expert_weights_scale", GgufValue::f32(2.5f));
    w.set(a + "expert_weights_norm", GgufValue::boolean(true));
  }
}

void add_gpt_oss_keys(GgufWriter& w, const ModelPreset& p) {
  set_u32(w, "gpt-oss.attention.sliding_window", 128);
  w.set("gpt-oss.rope.scaling.type", GgufValue::string("yarn"));
  w.set("gpt-oss.rope.scaling.factor", GgufValue::f32(32.0f));
  set_u32(w, "gpt-oss.rope.scaling.original_context_length", std::max<int64_t>(p.n_ctx / 32, 64));
  w.set("gpt-oss.rope.scaling.yarn_beta_fast", GgufValue::f32(32.0f));
  w.set("gpt-oss.rope.scaling.yarn_beta_slow", GgufValue::f32(1.0f));
}

// deepseek2 stores MLA as MQA over the compressed latent: key = latent + rope part, value = latent.
void add_mla_keys(GgufWriter& w, const ModelPreset& p) {
  set_u32(w, "deepseek2.vocab_size", p.n_vocab);
  set_u32(w, "deepseek2.attention.q_lora_rank", p.q_lora);
  set_u32(w, "deepseek2.attention.kv_lora_rank", p.kv_lora);
  set_u32(w, "deepseek2.attention.key_length", p.kv_lora + p.qk_rope);
  set_u32(w, "deepseek2.attention.value_length", p.kv_lora);
  set_u32(w, "deepseek2.attention.key_length_mla", p.qk_nope + p.qk_rope);
  set_u32(w, "deepseek2.attention.value_length_mla", p.v_head);
  set_u32(w, "deepseek2.rope.dimension_count", p.qk_rope);
}

Status add_attention(TensorMaker& make, const ArchTraits& arch, const ModelPreset& p, const std::string& b) {
  const int64_t q = p.n_head * p.head_dim, kv = p.n_head_kv * p.head_dim;
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_q.weight", q, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_k.weight", kv, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_v.weight", kv, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_output.weight", p.n_embd, q));
  if (arch.qkv_bias) {
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_q.bias", q, 0.0f, 0.02f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_k.bias", kv, 0.0f, 0.02f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_v.bias", kv, 0.0f, 0.02f));
  }
  if (arch.qk_norm) {
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_q_norm.weight", p.head_dim, 1.0f, 0.1f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_k_norm.weight", p.head_dim, 1.0f, 0.1f));
  }
  if (arch.gpt_oss) {
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_output.bias", p.n_embd, 0.0f, 0.02f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_sinks.weight", p.n_head, 0.0f, 1.0f));
  }
  return Status::ok();
}

// deepseek2's multi-head latent attention, split as llama.cpp wants it (attn_k_b, attn_v_b).
Status add_mla(TensorMaker& make, const ModelPreset& p, const std::string& b) {
  AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_q_a_norm.weight", p.q_lora, 1.0f, 0.0f));
  AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_kv_a_norm.weight", p.kv_lora, 1.0f, 0.0f));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_q_a.weight", p.q_lora, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_q_b.weight", p.n_head * (p.qk_nope + p.qk_rope), p.q_lora));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_kv_a_mqa.weight", p.kv_lora + p.qk_rope, p.n_embd));
  // Per head: k_b maps a latent to qk_nope values (dims {qk_nope, kv_lora, n_head}), v_b a
  // value head to the latent (dims {kv_lora, v_head, n_head}).
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_k_b.weight", p.kv_lora, p.qk_nope, p.n_head));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_v_b.weight", p.v_head, p.kv_lora, p.n_head));
  return make.matrix(b + "attn_output.weight", p.n_embd, p.n_head * p.v_head);
}

Status add_dense_ffn(TensorMaker& make, const ModelPreset& p, const std::string& b) {
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_gate.weight", p.n_ff, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_up.weight", p.n_ff, p.n_embd));
  return make.matrix(b + "ffn_down.weight", p.n_embd, p.n_ff);
}

Status add_moe_ffn(TensorMaker& make, const ArchTraits& arch, const ModelPreset& p, const std::string& b) {
  const int64_t e = p.n_expert, ff = p.n_ff_exp;
  const auto experts = arch.gpt_oss ? gpt_oss_expert_type() : std::nullopt;
  AUTOGLM_RETURN_IF_ERROR(
      make.vector(b + "ffn_gate_inp.weight", {p.n_embd, e}, 0.0f, 0.5f / std::sqrt(float(p.n_embd))));
  if (arch.gpt_oss) AUTOGLM_RETURN_IF_ERROR(make.vector(b + "ffn_gate_inp.bias", e, 0.0f, 0.02f));
  if (arch.probs_bias) AUTOGLM_RETURN_IF_ERROR(make.vector(b + "exp_probs_b.bias", e, 0.0f, 0.02f));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_gate_exps.weight", ff, p.n_embd, e, experts));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_up_exps.weight", ff, p.n_embd, e, experts));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_down_exps.weight", p.n_embd, ff, e, experts));
  if (arch.gpt_oss) {
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "ffn_gate_exps.bias", {ff, e}, 0.0f, 0.02f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "ffn_up_exps.bias", {ff, e}, 0.0f, 0.02f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "ffn_down_exps.bias", {p.n_embd, e}, 0.0f, 0.02f));
  }
  if (!arch.shared_expert) return Status::ok();
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_gate_shexp.weight", ff, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_up_shexp.weight", ff, p.n_embd));
  return make.matrix(b + "ffn_down_shexp.weight", p.n_embd, ff);
}

Status add_block(TensorMaker& make, const ArchTraits& arch, const ModelPreset& p, int64_t il) {
  const std::string b = "blk." + std::to_string(il) + ".";
  AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_norm.weight", p.n_embd, 1.0f, 0.0f));
  AUTOGLM_RETURN_IF_ERROR(arch.mla ? add_mla(make, p, b) : add_attention(make, arch, p, b));
  const char* ffn_norm = arch.ffn_post_attention_norm ? "post_attention_norm.weight" : "ffn_norm.weight";
  AUTOGLM_RETURN_IF_ERROR(make.vector(b + ffn_norm, p.n_embd, 1.0f, 0.0f));
  const bool dense = !arch.moe || (arch.leading_dense && il == 0);
  return dense ? add_dense_ffn(make, p, b) : add_moe_ffn(make, arch, p, b);
}

Result<ModelPreset> resolve_preset(const ArchTraits& arch, const CreateModelOptions& o) {
  AUTOGLM_ASSIGN_OR_RETURN(ModelPreset p, find_preset(arch, o.preset));
  if (o.n_vocab != 0 && (o.n_vocab < 512 || o.n_vocab > 1000000))
    return invalid_argument("--vocab " + std::to_string(o.n_vocab) + " is not in [512, 1000000]");
  if (o.n_layer != 0 && (o.n_layer < 1 || o.n_layer > 1000))
    return invalid_argument("--n-layer " + std::to_string(o.n_layer) + " is not in [1, 1000]");
  if (o.n_vocab != 0) p.n_vocab = o.n_vocab;
  if (o.n_layer != 0) p.n_layer = o.n_layer;
  return p;
}

}  // namespace

const std::vector<std::string>& create_model_presets() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& p : dense_presets()) n.push_back(p.name);
    for (const auto& p : moe_presets())
      if (std::find(n.begin(), n.end(), p.name) == n.end()) n.push_back(p.name);
    n.push_back("9b");  // the vision-language models'
    return n;
  }();
  return names;
}

const std::vector<std::string>& create_model_archs() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& a : arch_traits()) n.push_back(a.name);
    n.push_back("glm4v");
    n.push_back("qwen25vl");
    return n;
  }();
  return names;
}

Result<ModelPreset> create_model_preset(const CreateModelOptions& o) {
  AUTOGLM_ASSIGN_OR_RETURN(const ArchTraits arch, find_arch(o.arch));
  return resolve_preset(arch, o);
}

Status create_random_model(const CreateModelOptions& o, const std::string& path) {
  if (is_vision_arch(o.arch)) return create_random_vision_model(o, path);
  AUTOGLM_ASSIGN_OR_RETURN(const ArchTraits arch, find_arch(o.arch));
  AUTOGLM_ASSIGN_OR_RETURN(const ModelPreset p, resolve_preset(arch, o));
  if (!ref::dtype_can_quantize(o.type))
    return invalid_argument("--type " + std::string(dtype_name(o.type)) +
                            " is not a weight type this build writes (it reads more than it writes)");

  GgufWriter w;
  w.set("general.architecture", GgufValue::string(o.arch));
  w.set("general.name", GgufValue::string("autoglm-random-" + o.arch + "-" + p.name));
  w.set("general.file_type", GgufValue::u32(gguf_file_type(o.type)));
  if (dtype_info(o.type).block_elems > 1) w.set("general.quantization_version", GgufValue::u32(2));
  add_common_keys(w, arch, p);
  if (arch.moe) add_moe_keys(w, arch, p);
  if (arch.gpt_oss) add_gpt_oss_keys(w, p);
  if (arch.mla) add_mla_keys(w, p);
  add_vocabulary(w, p.n_vocab);

  ThreadPool pool(o.threads > 0 ? o.threads : physical_core_count());
  TensorMaker make(w, o.type, o.seed, pool);
  AUTOGLM_RETURN_IF_ERROR(make.matrix("token_embd.weight", p.n_vocab, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.vector("output_norm.weight", p.n_embd, 1.0f, 0.0f));
  AUTOGLM_RETURN_IF_ERROR(make.matrix("output.weight", p.n_vocab, p.n_embd));
  for (int64_t il = 0; il < p.n_layer; ++il) AUTOGLM_RETURN_IF_ERROR(add_block(make, arch, p, il));
  return w.write(path);
}

Status create_random_lora(const std::string& base_path, int64_t rank, float alpha, uint64_t seed,
                          const std::string& path) {
  if (rank < 1 || rank > 1024) return invalid_argument("--rank " + std::to_string(rank) + " is not in [1, 1024]");
  AUTOGLM_ASSIGN_OR_RETURN(auto base, GgufFile::open(base_path));
  const std::string arch = base->get_string("general.architecture").value_or("llama");
  GgufWriter w;
  w.set("general.architecture", GgufValue::string(arch));
  w.set("general.type", GgufValue::string("adapter"));
  w.set("adapter.type", GgufValue::string("lora"));
  w.set("adapter.lora.alpha", GgufValue::f32(alpha));
  const char* targets[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  // The NextN (MTP) blocks after the layers the forward pass runs take no adapter.
  const int64_t n_run =
      base->get_int(arch + ".block_count").value_or(0) - base->get_int(arch + ".nextn_predict_layers").value_or(0);
  for (const GgufTensorInfo& t : base->tensors()) {
    if (t.name.rfind("blk.", 0) == 0 && std::stoll(t.name.substr(4)) >= n_run) continue;
    bool targeted = false;
    for (const char* name : targets)
      targeted = targeted || (t.name.rfind("blk.", 0) == 0 &&
                              t.name.find(std::string(".") + name + ".weight") != std::string::npos);
    if (!targeted || t.dims.size() != 2) continue;
    const int64_t n_in = t.dims[0], n_out = t.dims[1];
    Rng rng{name_seed(seed, t.name)};
    std::vector<float> a(size_t(rank * n_in)), b(size_t(n_out * rank));
    const float a_std = 1.0f / std::sqrt(float(n_in)), b_std = 0.01f;
    for (float& v : a) v = rng.normal() * a_std;
    for (float& v : b) v = rng.normal() * b_std;
    auto bytes = [](const std::vector<float>& v) {
      std::vector<uint8_t> out(v.size() * sizeof(float));
      std::memcpy(out.data(), v.data(), out.size());
      return out;
    };
    AUTOGLM_RETURN_IF_ERROR(w.add_tensor(t.name + ".lora_a", DType::F32, {n_in, rank}, bytes(a)));
    AUTOGLM_RETURN_IF_ERROR(w.add_tensor(t.name + ".lora_b", DType::F32, {rank, n_out}, bytes(b)));
  }
  return w.write(path);
}

}  // namespace autoglm
