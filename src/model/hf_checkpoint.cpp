#include "model/hf_checkpoint.h"

#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "formats/json_file.h"
#include "formats/safetensors.h"
#include "model/hf_arch.h"

namespace autoglm {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// config.json fields under the names the different model families use.
class Config {
 public:
  Config(json j, std::string path) : j_(std::move(j)), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  // Top-level fields first, then transformers 5's rope_parameters (rope_theta, partial_rotary_factor).
  const json* find(std::initializer_list<const char*> names) const {
    for (const char* n : names)
      if (j_.contains(n) && !j_[n].is_null()) return &j_[n];
    if (j_.contains("rope_parameters") && j_["rope_parameters"].is_object()) {
      const json& rp = j_["rope_parameters"];
      for (const char* n : names)
        if (std::string(n) != "rope_type" && rp.contains(n) && !rp[n].is_null()) return &rp[n];
    }
    return nullptr;
  }
  // A field that may be 0 (first_k_dense_replace, num_nextn_predict_layers).
  Result<int64_t> count(std::initializer_list<const char*> names, int64_t fallback) const {
    const json* v = find(names);
    if (!v) return fallback;
    if (!v->is_number_integer() || v->get<int64_t>() < 0)
      return corrupt(path_ + ": field '" + *names.begin() + "' must be a non-negative integer");
    return v->get<int64_t>();
  }
  Result<int64_t> integer(std::initializer_list<const char*> names, std::optional<int64_t> fallback = {}) const {
    const json* v = find(names);
    if (!v) {
      if (fallback) return *fallback;
      return corrupt(path_ + ": missing field '" + *names.begin() + "'");
    }
    if (!v->is_number_integer() || v->get<int64_t>() <= 0)
      return corrupt(path_ + ": field '" + *names.begin() + "' must be a positive integer");
    return v->get<int64_t>();
  }
  Result<double> number(std::initializer_list<const char*> names, double fallback) const {
    const json* v = find(names);
    if (!v) return fallback;
    if (!v->is_number() || !(v->get<double>() > 0))
      return corrupt(path_ + ": field '" + *names.begin() + "' must be a positive number");
    return v->get<double>();
  }
  bool flag(const char* name, bool fallback) const {
    const json* v = find({name});
    return v && v->is_boolean() ? v->get<bool>() : fallback;
  }
  const json& raw() const { return j_; }

 private:
  json j_;
  std::string path_;
};

using Metadata = std::vector<std::pair<std::string, GgufValue>>;

// Storage for the tensors that cannot view the mapped files, kept alive by the GgufFile.
struct Storage {
  std::unique_ptr<SafetensorsCheckpoint> checkpoint;
  std::vector<std::vector<uint8_t>> buffers;
};

struct Hparams {
  int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, head_dim_v, n_ff, n_rot;
  double rope_base;
  int64_t n_expert = 0;  // routed experts per MoE layer (0: dense)
  int64_t n_nextn = 0;   // NextN/MTP layers kept after the n_layer decoder layers
  // MLA (DeepSeek): per-head sizes of the un-absorbed attention.
  int64_t kv_lora_rank = 0, qk_nope = 0, v_head = 0;
  bool rope_interleave = true;  // MLA rope on adjacent pairs (false: rotate_half, permuted here)
};

Status check_supported_options(const Config& c, const HfArchitecture& arch) {
  auto refuse = [&](const std::string& what) {
    return unsupported(c.path() + ": " + what + " is not supported for " + arch.hf_name);
  };
  if (const json* act = c.find({"hidden_act", "hidden_activation"}); act && act->is_string() && *act != "silu")
    return refuse("hidden_act '" + act->get<std::string>() + "'");
  if (c.flag("mlp_bias", false)) return refuse("mlp_bias");
  if (arch.gguf_arch == "chatglm") {
    if (!c.flag("rmsnorm", true)) return refuse("LayerNorm (rmsnorm: false)");
    if (c.flag("apply_residual_connection_post_layernorm", false))
      return refuse("apply_residual_connection_post_layernorm");
    if (c.flag("add_bias_linear", false)) return refuse("add_bias_linear");
  }
  if (!arch.experts.prefix.empty()) {
    // llama.cpp runs every layer (after the leading dense ones) as a MoE layer.
    if (const json* step = c.find({"decoder_sparse_step", "moe_layer_freq"}); step && *step != 1)
      return refuse("a MoE layer every " + step->dump() + " layers (decoder_sparse_step/moe_layer_freq)");
    if (const json* dense = c.find({"mlp_only_layers"}); dense && dense->is_array() && !dense->empty())
      return refuse("mlp_only_layers");
  }
  if (arch.mla && c.flag("attention_bias", false)) return refuse("attention_bias with latent attention");
  if (arch.gpt_oss_experts) {
    if (const json* limit = c.find({"swiglu_limit"}); limit && (!limit->is_number() || limit->get<double>() != 7.0))
      return refuse("swiglu_limit " + limit->dump() + " (llama.cpp's gpt-oss has 7)");
    // llama.cpp's gpt-oss: the window on layers 0, 2, 4...
    if (const json* types = c.find({"layer_types"}); types && types->is_array())
      for (size_t i = 0; i < types->size(); ++i)
        if ((*types)[i] != (i % 2 == 0 ? "sliding_attention" : "full_attention"))
          return refuse("layer_types other than alternating sliding_attention, full_attention");
  }
  return Status::ok();
}

Result<Hparams> read_hparams(const Config& c, const HfArchitecture& arch) {
  Hparams h{};
  AUTOGLM_ASSIGN_OR_RETURN(h.n_embd, c.integer({"hidden_size"}));
  AUTOGLM_ASSIGN_OR_RETURN(h.n_layer, c.integer({"num_hidden_layers", "num_layers"}));
  AUTOGLM_ASSIGN_OR_RETURN(h.n_head, c.integer({"num_attention_heads"}));
  AUTOGLM_ASSIGN_OR_RETURN(h.n_ff, c.integer({"intermediate_size", "ffn_hidden_size"}));
  if (h.n_embd % h.n_head != 0 && !c.find({"head_dim", "kv_channels"}) && !arch.mla)
    return corrupt(c.path() + ": hidden_size is not a multiple of num_attention_heads and no head_dim is given");
  AUTOGLM_ASSIGN_OR_RETURN(h.head_dim, c.integer({"head_dim", "kv_channels"}, h.n_embd / h.n_head));
  h.head_dim_v = h.head_dim;
  const bool multi_query = arch.gguf_arch != "chatglm" || c.flag("multi_query_attention", false);
  AUTOGLM_ASSIGN_OR_RETURN(h.n_head_kv, c.integer({"num_key_value_heads", "multi_query_group_num"}, h.n_head));
  if (!multi_query) h.n_head_kv = h.n_head;
  AUTOGLM_ASSIGN_OR_RETURN(const double fraction, c.number({"partial_rotary_factor"}, arch.rotary_fraction));
  if (fraction > 1) return corrupt(c.path() + ": partial_rotary_factor must be at most 1");
  h.n_rot = int64_t(double(h.head_dim) * fraction);
  if (arch.rope_base_from_ratio) {
    AUTOGLM_ASSIGN_OR_RETURN(const double ratio, c.number({"rope_ratio"}, 1.0));
    h.rope_base = 10000.0 * ratio;
  } else {
    AUTOGLM_ASSIGN_OR_RETURN(h.rope_base, c.number({"rope_theta"}, 10000.0));
  }
  return h;
}

// Llama 3.1 scaling as per-frequency divisors of the rotation (what GGUF stores as rope_freqs).
std::vector<float> llama3_rope_factors(const json& rs, const Config& c, const Hparams& h) {
  const double factor = rs.value("factor", 8.0), low = rs.value("low_freq_factor", 1.0),
               high = rs.value("high_freq_factor", 4.0);
  double original = 8192;
  if (rs.contains("original_max_position_embeddings") && rs["original_max_position_embeddings"].is_number())
    original = rs["original_max_position_embeddings"].get<double>();
  else if (const json* v = c.find({"original_max_position_embeddings"}); v && v->is_number())
    original = v->get<double>();
  const double low_wavelen = original / low, high_wavelen = original / high;
  std::vector<float> factors;
  for (int64_t i = 0; i < h.n_rot / 2; ++i) {
    const double freq = std::pow(h.rope_base, -2.0 * double(i) / double(h.n_rot));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(float(factor));
    } else {
      const double smooth = (original / wavelen - low) / (high - low);
      factors.push_back(float(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return factors;
}

// YaRN under llama.cpp's keys; DeepSeek's mscale_all_dim as the converter writes it (0.1 x).
Status write_yarn(const Config& c, const json& rs, double factor, const std::string& p, Metadata& md) {
  md.emplace_back(p + "rope.scaling.type", GgufValue::string("yarn"));
  md.emplace_back(p + "rope.scaling.factor", GgufValue::f32(float(factor)));
  const json* orig = rs.contains("original_max_position_embeddings") ? &rs["original_max_position_embeddings"]
                                                                     : c.find({"original_max_position_embeddings"});
  if (!orig || !orig->is_number_integer() || orig->get<int64_t>() <= 0)
    return corrupt(c.path() + ": rope_scaling yarn needs a positive 'original_max_position_embeddings'");
  md.emplace_back(p + "rope.scaling.original_context_length", GgufValue::u32(orig->get<uint32_t>()));
  const std::pair<const char*, const char*> floats[] = {{"beta_fast", "rope.scaling.yarn_beta_fast"},
                                                        {"beta_slow", "rope.scaling.yarn_beta_slow"},
                                                        {"attention_factor", "rope.scaling.yarn_attn_factor"}};
  for (const auto& [hf, key] : floats)
    if (rs.contains(hf) && rs[hf].is_number()) md.emplace_back(p + key, GgufValue::f32(rs[hf].get<float>()));
  if (rs.contains("mscale_all_dim") && rs["mscale_all_dim"].is_number())
    md.emplace_back(p + "rope.scaling.yarn_log_multiplier", GgufValue::f32(0.1f * rs["mscale_all_dim"].get<float>()));
  return Status::ok();
}

// M-RoPE's mrope_section (rotated pairs per axis t, h, w) as llama.cpp's rope.dimension_sections.
Status write_mrope_sections(const Config& c, const json& sections, const Hparams& h, const std::string& p,
                            Metadata& md) {
  if (!sections.is_array() || sections.size() != 3)
    return corrupt(c.path() + ": rope_scaling.mrope_section must be a list of 3 integers");
  std::vector<int32_t> v;
  for (const json& n : sections) {
    if (!n.is_number_integer() || n.get<int64_t>() <= 0)
      return corrupt(c.path() + ": rope_scaling.mrope_section must hold positive integers");
    v.push_back(n.get<int32_t>());
  }
  if (int64_t(v[0]) + v[1] + v[2] != h.n_rot / 2)
    return corrupt(c.path() + ": rope_scaling.mrope_section sums to " + std::to_string(int64_t(v[0]) + v[1] + v[2]) +
                   ", not half the rotated dims (" + std::to_string(h.n_rot / 2) + ")");
  v.push_back(0);
  md.emplace_back(p + "rope.dimension_sections", GgufValue::i32_array(v));
  return Status::ok();
}

// rope_scaling: linear becomes a frequency scale, dynamic NTK a larger base (fixed at the
// scaled context, as vLLM does, so that cached keys never need re-rotating), llama3
// per-frequency factors.
Status apply_rope_scaling(const Config& c, Hparams& h, const std::string& p, Metadata& md,
                          std::vector<float>& factors) {
  const json* rs = c.find({"rope_scaling"});
  if (!rs && c.raw().contains("rope_parameters")) rs = &c.raw()["rope_parameters"];  // transformers 5
  if (!rs) return Status::ok();
  if (!rs->is_object()) return corrupt(c.path() + ": rope_scaling must be an object");
  const std::string type = rs->value("rope_type", rs->value("type", std::string("default")));
  const double factor = rs->value("factor", 1.0);
  if (!(factor > 0)) return corrupt(c.path() + ": rope_scaling.factor must be positive");
  if (rs->contains("mrope_section")) AUTOGLM_RETURN_IF_ERROR(write_mrope_sections(c, (*rs)["mrope_section"], h, p, md));
  if (type == "default" || type == "mrope") return Status::ok();
  if (type == "linear") {
    md.emplace_back(p + "rope.scaling.type", GgufValue::string("linear"));
    md.emplace_back(p + "rope.scaling.factor", GgufValue::f32(float(factor)));
  } else if (type == "dynamic") {
    // Hugging Face's dynamic NTK base at the longest scaled context, factor x max_position_embeddings.
    if (h.n_rot > 2) h.rope_base *= std::pow(factor * factor - factor + 1, double(h.n_rot) / double(h.n_rot - 2));
  } else if (type == "llama3") {
    factors = llama3_rope_factors(*rs, c, h);
  } else if (type == "yarn") {
    AUTOGLM_RETURN_IF_ERROR(write_yarn(c, *rs, factor, p, md));
  } else {
    return unsupported(c.path() + ": rope_scaling type '" + type +
                       "' is not supported (linear, dynamic, llama3, yarn, mrope)");
  }
  return Status::ok();
}

// DeepSeek's latent attention as llama.cpp's converter writes it: one shared KV head of
// kv_lora_rank + qk_rope_head_dim (the absorbed form), the un-absorbed per-head sizes under *_mla.
Status read_mla(const Config& c, Hparams& h) {
  AUTOGLM_ASSIGN_OR_RETURN(h.kv_lora_rank, c.integer({"kv_lora_rank"}, 512));
  AUTOGLM_ASSIGN_OR_RETURN(h.qk_nope, c.integer({"qk_nope_head_dim"}));
  AUTOGLM_ASSIGN_OR_RETURN(h.n_rot, c.integer({"qk_rope_head_dim"}));
  AUTOGLM_ASSIGN_OR_RETURN(h.v_head, c.integer({"v_head_dim"}));
  if (h.n_rot % 2 != 0) return corrupt(c.path() + ": field 'qk_rope_head_dim' must be even");
  h.rope_interleave = c.flag("rope_interleave", true);
  h.n_head_kv = 1;
  h.head_dim = h.kv_lora_rank + h.n_rot;
  h.head_dim_v = h.kv_lora_rank;
  return Status::ok();
}

void write_mla(const Config& c, const Hparams& h, const std::function<void(const std::string&, int64_t)>& u32) {
  // q_lora_rank 0 (no low-rank query, as DeepSeek-V2-Lite): llama.cpp requires the key unless it
  // recognises the Lite model by its layer count.
  const json* q_lora = c.find({"q_lora_rank"});
  u32("attention.q_lora_rank", q_lora && q_lora->is_number_integer() ? q_lora->get<int64_t>() : 0);
  u32("attention.kv_lora_rank", h.kv_lora_rank);
  u32("attention.key_length_mla", h.qk_nope + h.n_rot);
  u32("attention.value_length_mla", h.v_head);
}

// Mixture-of-experts keys under the names llama.cpp's converter writes.
Status write_moe(const Config& c, const HfArchitecture& arch, Hparams& h, Metadata& md, const std::string& p) {
  auto u32 = [&](const std::string& key, int64_t v) { md.emplace_back(p + key, GgufValue::u32(uint32_t(v))); };
  AUTOGLM_ASSIGN_OR_RETURN(h.n_expert, c.integer({"n_routed_experts", "num_local_experts", "num_experts"}));
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t used, c.integer({"num_experts_per_tok", "experts_per_token"}));
  if (used > h.n_expert)
    return corrupt(c.path() + ": field 'num_experts_per_tok' (" + std::to_string(used) + ") exceeds the " +
                   std::to_string(h.n_expert) + " experts");
  u32("expert_count", h.n_expert);
  u32("expert_used_count", used);
  if (c.find({"moe_intermediate_size"})) {
    AUTOGLM_ASSIGN_OR_RETURN(const int64_t n_ff_exp, c.integer({"moe_intermediate_size"}));
    u32("expert_feed_forward_length", n_ff_exp);
  }
  if (arch.gpt_oss_experts) u32("expert_feed_forward_length", h.n_ff);
  if (c.find({"shared_expert_intermediate_size"})) {  // Qwen2-MoE
    AUTOGLM_ASSIGN_OR_RETURN(const int64_t n, c.integer({"shared_expert_intermediate_size"}));
    u32("expert_shared_feed_forward_length", n);
  }
  if (c.find({"n_shared_experts"}) || arch.mla) {
    AUTOGLM_ASSIGN_OR_RETURN(const int64_t n, c.count({"n_shared_experts"}, 0));
    u32("expert_shared_count", n);
  }
  if (c.find({"first_k_dense_replace"}) || arch.mla) {
    AUTOGLM_ASSIGN_OR_RETURN(const int64_t n, c.count({"first_k_dense_replace"}, 0));
    u32("leading_dense_block_count", n);
  }
  int gating = arch.default_gating;
  if (const json* f = c.find({"scoring_func"}); f && f->is_string()) {
    if (*f == "softmax") {
      gating = 1;
    } else if (*f == "sigmoid") {
      gating = 2;
    } else {
      return unsupported(c.path() + ": scoring_func '" + f->get<std::string>() +
                         "' is not supported (softmax, sigmoid)");
    }
  }
  if (gating != 0) u32("expert_gating_func", gating);
  if (const json* s = c.find({"routed_scaling_factor"}); s && s->is_number())
    md.emplace_back(p + "expert_weights_scale", GgufValue::f32(s->get<float>()));
  if (const json* n = c.find({"norm_topk_prob"}); n && n->is_boolean())
    md.emplace_back(p + "expert_weights_norm", GgufValue::boolean(n->get<bool>()));
  // DeepSeek-V2's "greedy" router ignores n_group (llama.cpp would restrict by groups).
  const json* method = c.find({"topk_method"});
  const bool greedy = method && method->is_string() && *method == "greedy";
  if (c.find({"n_group"}) && !greedy) {
    AUTOGLM_ASSIGN_OR_RETURN(const int64_t groups, c.integer({"n_group"}));
    AUTOGLM_ASSIGN_OR_RETURN(const int64_t used_groups, c.integer({"topk_group"}, groups));
    if (groups <= 0 || used_groups <= 0 || h.n_expert % groups != 0 || used_groups > groups ||
        used_groups * (h.n_expert / groups) < used)
      return corrupt(c.path() + ": field 'n_group' (" + std::to_string(groups) + ") must divide the " +
                     std::to_string(h.n_expert) +
                     " experts, be at least topk_group (positive), and leave at "
                     "least num_experts_per_tok experts in topk_group groups");
    u32("expert_group_count", groups);
    u32("expert_group_used_count", used_groups);
  }
  return Status::ok();
}

Result<Metadata> metadata_from_config(const Config& c, const HfArchitecture& arch, const std::string& dir,
                                      std::vector<float>& rope_factors, Hparams& h) {
  AUTOGLM_RETURN_IF_ERROR(check_supported_options(c, arch));
  AUTOGLM_ASSIGN_OR_RETURN(h, read_hparams(c, arch));
  if (arch.mla) AUTOGLM_RETURN_IF_ERROR(read_mla(c, h));
  if (arch.keep_nextn) {
    AUTOGLM_ASSIGN_OR_RETURN(h.n_nextn, c.count({"num_nextn_predict_layers"}, 0));
  }
  const std::string p = arch.gguf_arch + ".";
  Metadata md;
  md.emplace_back("general.architecture", GgufValue::string(arch.gguf_arch));
  md.emplace_back("general.name", GgufValue::string(fs::path(dir).filename().string()));
  auto u32 = [&](const std::string& key, int64_t v) { md.emplace_back(p + key, GgufValue::u32(uint32_t(v))); };
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t n_ctx, c.integer({"max_position_embeddings", "seq_length"}, 4096));
  u32("context_length", n_ctx);
  u32("embedding_length", h.n_embd);
  u32("feed_forward_length", h.n_ff);
  u32("block_count", h.n_layer + h.n_nextn);  // the NextN layers follow the decoder's
  if (h.n_nextn > 0) u32("nextn_predict_layers", h.n_nextn);
  u32("attention.head_count", h.n_head);
  u32("attention.head_count_kv", h.n_head_kv);
  u32("attention.key_length", h.head_dim);
  u32("attention.value_length", h.head_dim_v);
  if (arch.mla) write_mla(c, h, u32);
  if (!arch.experts.prefix.empty()) AUTOGLM_RETURN_IF_ERROR(write_moe(c, arch, h, md, p));
  u32("rope.dimension_count", h.n_rot);
  AUTOGLM_ASSIGN_OR_RETURN(const double eps, c.number({"rms_norm_eps", "layernorm_epsilon"}, 1e-6));
  md.emplace_back(p + "attention.layer_norm_rms_epsilon", GgufValue::f32(float(eps)));
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t n_vocab, c.integer({"padded_vocab_size", "vocab_size"}));
  u32("vocab_size", n_vocab);
  if (const json* w = c.find({"sliding_window"}); w && c.flag("use_sliding_window", true)) {
    if (!w->is_number_integer() || w->get<int64_t>() <= 0)
      return corrupt(c.path() + ": field 'sliding_window' must be a positive integer or null");
    u32("attention.sliding_window", w->get<int64_t>());
  }
  AUTOGLM_RETURN_IF_ERROR(apply_rope_scaling(c, h, p, md, rope_factors));
  md.emplace_back(p + "rope.freq_base", GgufValue::f32(float(h.rope_base)));
  return md;
}

Result<DType> weight_dtype(const SafetensorsTensor& t, const std::string& file) {
  if (t.dtype == "F32") return DType::F32;
  if (t.dtype == "F16") return DType::F16;
  if (t.dtype == "BF16") return DType::BF16;
  return unsupported(file + ": tensor '" + t.name + "' has dtype " + t.dtype +
                     ", which cannot be loaded as a weight (F32, F16, BF16)");
}

}  // namespace

namespace {

// The layer index and the rest of a per-layer HF tensor name; false for other names.
bool split_layer_name(const HfArchitecture& arch, const std::string& name, int64_t& layer, std::string& suffix) {
  if (name.compare(0, arch.layer_prefix.size(), arch.layer_prefix) != 0) return false;
  const size_t dot = name.find('.', arch.layer_prefix.size());
  if (dot == std::string::npos) return false;
  const std::string index = name.substr(arch.layer_prefix.size(), dot - arch.layer_prefix.size());
  if (index.empty() || index.size() > 9 || index.find_first_not_of("0123456789") != std::string::npos) return false;
  layer = std::stoll(index);
  suffix = name.substr(dot + 1);
  return true;
}

}  // namespace

std::string gguf_name(const HfArchitecture& arch, const std::string& name) {
  for (const auto& [hf, gguf] : arch.global_tensors)
    if (name == hf) return gguf;
  int64_t layer = 0;
  std::string suffix;
  if (!split_layer_name(arch, name, layer, suffix)) return "";
  for (const auto& [hf, gguf] : arch.layer_tensors)
    if (suffix == hf) return "blk." + std::to_string(layer) + "." + gguf;
  return "";
}

std::vector<uint8_t> permute_rows_for_rope(const uint8_t* data, int64_t rows, int64_t row_bytes, int64_t head_dim) {
  std::vector<uint8_t> out(size_t(rows * row_bytes));
  const int64_t half = head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t head = r / head_dim, in_head = r % head_dim;
    const int64_t src = head * head_dim + (in_head % 2) * half + in_head / 2;
    std::memcpy(out.data() + r * row_bytes, data + src * row_bytes, size_t(row_bytes));
  }
  return out;
}

namespace {

// Each head's first n_rot rows from adjacent pairs (2i, 2i + 1) to halves (i, i + n_rot/2).
std::vector<uint8_t> neox_rope_rows(const uint8_t* data, int64_t rows, int64_t row_bytes, int64_t head_dim,
                                    int64_t n_rot) {
  std::vector<uint8_t> out(data, data + rows * row_bytes);
  const int64_t half = n_rot / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t in_head = r % head_dim;
    if (in_head >= n_rot) continue;
    const int64_t src = r - in_head + (in_head < half ? 2 * in_head : 2 * (in_head - half) + 1);
    std::memcpy(out.data() + r * row_bytes, data + src * row_bytes, size_t(row_bytes));
  }
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<GgufTensorInfo> map_tensor(const SafetensorsTensor& t, const std::string& file, const std::string& name,
                                  const HfArchitecture& arch, const Hparams& h, Storage& storage) {
  GgufTensorInfo g;
  g.name = name;
  AUTOGLM_ASSIGN_OR_RETURN(g.type, weight_dtype(t, file));
  g.dims.assign(t.shape.rbegin(), t.shape.rend());
  if (g.dims.empty()) return corrupt(file + ": tensor '" + t.name + "' is a scalar");
  g.data = t.data;
  g.n_bytes = t.n_bytes;
  const bool is_q = ends_with(name, "attn_q.weight") || ends_with(name, "attn_q.bias");
  const bool is_k = ends_with(name, "attn_k.weight") || ends_with(name, "attn_k.bias");
  if (arch.permute_qk && (is_q || is_k)) {
    const int64_t rows = g.dims.size() == 2 ? g.dims[1] : g.dims[0];
    const int64_t row_bytes = int64_t(t.n_bytes) / std::max<int64_t>(rows, 1);
    if (rows != (is_q ? h.n_head : h.n_head_kv) * h.head_dim)
      return corrupt(file + ": tensor '" + t.name + "' has " + std::to_string(rows) + " rows, expected " +
                     std::to_string((is_q ? h.n_head : h.n_head_kv) * h.head_dim));
    storage.buffers.push_back(permute_rows_for_rope(t.data, rows, row_bytes, h.head_dim));
    g.data = storage.buffers.back().data();
  }
  if (arch.neox_rope_rows && (is_q || is_k)) {
    const int64_t rows = g.dims.size() == 2 ? g.dims[1] : g.dims[0];
    if (rows % h.head_dim != 0)
      return corrupt(file + ": tensor '" + t.name + "' has " + std::to_string(rows) + " rows, not whole heads of " +
                     std::to_string(h.head_dim));
    storage.buffers.push_back(neox_rope_rows(t.data, rows, int64_t(t.n_bytes) / rows, h.head_dim, h.n_rot));
    g.data = storage.buffers.back().data();
  }
  return g;
}

// ---- Tensors that become other tensors: stacked experts, DeepSeek's kv_b_proj split. ----

int64_t element_bytes(DType t) {
  return t == DType::F32 ? 4 : 2;
}

GgufTensorInfo owned(std::string name, DType type, std::vector<int64_t> dims, std::vector<uint8_t> bytes,
                     Storage& storage) {
  storage.buffers.push_back(std::move(bytes));
  const auto& b = storage.buffers.back();
  return {std::move(name), type, std::move(dims), 0, b.data(), b.size()};
}

// One routed expert's projection: which GGUF tensor it joins and at which index.
struct ExpertPart {
  const SafetensorsTensor* tensor = nullptr;
  std::string file;
};
using PendingExperts = std::map<std::string, std::map<int64_t, ExpertPart>>;  // GGUF name -> expert -> part
// gpt-oss MXFP4 experts: "gate_up" or "down" of a layer's blk. prefix -> its blocks and scales.
struct Mxfp4Parts {
  ExpertPart blocks, scales;
};
struct Pending {
  PendingExperts experts;
  std::map<std::string, std::map<std::string, Mxfp4Parts>> mxfp4;  // blk. -> "gate_up"/"down" -> parts
};

// "mlp.experts.E.gate_proj.weight" -> ("ffn_gate_exps", E); false when `suffix` is no expert's.
bool expert_part(const HfExperts& experts, const std::string& suffix, std::string& gguf, int64_t& expert) {
  if (experts.prefix.empty() || suffix.compare(0, experts.prefix.size(), experts.prefix) != 0) return false;
  const size_t dot = suffix.find('.', experts.prefix.size());
  if (dot == std::string::npos) return false;
  const std::string index = suffix.substr(experts.prefix.size(), dot - experts.prefix.size());
  if (index.empty() || index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos) return false;
  for (const auto& [hf, name] : experts.projections)
    if (suffix.substr(dot + 1) == hf + ".weight") {
      gguf = name + ".weight";
      expert = std::stoll(index);
      return true;
    }
  return false;
}

// Experts 0..n-1 of one projection, [n][rows][cols] -> GGUF dims [cols, rows, n].
Result<GgufTensorInfo> stack_experts(const std::string& name, const std::map<int64_t, ExpertPart>& parts,
                                     int64_t n_expert, Storage& storage) {
  const ExpertPart& first = parts.begin()->second;
  for (int64_t e = 0; e < n_expert; ++e)
    if (!parts.count(e))
      return corrupt(first.file + ": expert " + std::to_string(e) + " of " + name + " is missing (have '" +
                     first.tensor->name + "' and " + std::to_string(parts.size() - 1) + " more)");
  if (int64_t(parts.size()) != n_expert)
    return corrupt(first.file + ": " + name + " has an expert beyond the " + std::to_string(n_expert) +
                   " of config.json ('" + parts.rbegin()->second.tensor->name + "')");
  AUTOGLM_ASSIGN_OR_RETURN(const DType type, weight_dtype(*first.tensor, first.file));
  std::vector<uint8_t> bytes;
  bytes.reserve(size_t(first.tensor->n_bytes) * size_t(n_expert));
  for (const auto& [e, part] : parts) {
    const SafetensorsTensor& t = *part.tensor;
    if (t.shape != first.tensor->shape || t.dtype != first.tensor->dtype || t.shape.size() != 2)
      return corrupt(part.file + ": tensor '" + t.name + "' is not a matrix of the shape and dtype of '" +
                     first.tensor->name + "'");
    bytes.insert(bytes.end(), t.data, t.data + t.n_bytes);
  }
  const auto& shape = first.tensor->shape;
  return owned(name, type, {shape[1], shape[0], n_expert}, std::move(bytes), storage);
}

// transformers 5's stacked experts: gate_up_proj [n][2 ff][d] split into gate and up.
Result<std::vector<GgufTensorInfo>> split_gate_up(const SafetensorsTensor& t, const std::string& file,
                                                  const std::string& blk, Storage& storage) {
  AUTOGLM_ASSIGN_OR_RETURN(const DType type, weight_dtype(t, file));
  if (t.shape.size() != 3 || t.shape[1] % 2 != 0)
    return corrupt(file + ": tensor '" + t.name + "' must be [experts, 2 x ff, hidden]");
  const int64_t n = t.shape[0], ff = t.shape[1] / 2, half = ff * t.shape[2] * element_bytes(type);
  std::vector<uint8_t> gate, up;
  for (int64_t e = 0; e < n; ++e) {
    const uint8_t* src = t.data + e * 2 * half;
    gate.insert(gate.end(), src, src + half);
    up.insert(up.end(), src + half, src + 2 * half);
  }
  std::vector<GgufTensorInfo> out;
  out.push_back(owned(blk + "ffn_gate_exps.weight", type, {t.shape[2], ff, n}, std::move(gate), storage));
  out.push_back(owned(blk + "ffn_up_exps.weight", type, {t.shape[2], ff, n}, std::move(up), storage));
  return out;
}

// DeepSeek's kv_b_proj [heads x (nope + v)][kv_lora] as llama.cpp's converter splits it:
// attn_k_b (dims [nope, kv_lora, heads], each head's nope rows transposed) and attn_v_b
// (dims [kv_lora, v, heads], each head's v rows as they are).
Result<std::vector<GgufTensorInfo>> split_kv_b(const SafetensorsTensor& t, const std::string& file,
                                               const std::string& blk, const Hparams& h, Storage& storage) {
  const int64_t n_head = h.n_head;
  AUTOGLM_ASSIGN_OR_RETURN(const DType type, weight_dtype(t, file));
  const int64_t per_head = h.qk_nope + h.v_head, lora = h.kv_lora_rank, eb = element_bytes(type);
  if (t.shape.size() != 2 || t.shape[0] != n_head * per_head || t.shape[1] != lora)
    return corrupt(file + ": tensor '" + t.name + "' must be [" + std::to_string(n_head * per_head) + ", " +
                   std::to_string(lora) + "] (heads x (qk_nope_head_dim + v_head_dim), kv_lora_rank)");
  std::vector<uint8_t> k(size_t(n_head * h.qk_nope * lora * eb)), v;
  for (int64_t hd = 0; hd < n_head; ++hd) {
    const uint8_t* head = t.data + hd * per_head * lora * eb;
    for (int64_t j = 0; j < h.qk_nope; ++j)
      for (int64_t l = 0; l < lora; ++l)
        std::memcpy(&k[size_t(((hd * lora + l) * h.qk_nope + j) * eb)], head + (j * lora + l) * eb, size_t(eb));
    v.insert(v.end(), head + h.qk_nope * lora * eb, head + per_head * lora * eb);
  }
  std::vector<GgufTensorInfo> out;
  out.push_back(owned(blk + "attn_k_b.weight", type, {h.qk_nope, lora, n_head}, std::move(k), storage));
  out.push_back(owned(blk + "attn_v_b.weight", type, {lora, h.v_head, n_head}, std::move(v), storage));
  return out;
}

// rope_interleave: false (rotate_half on the rope part): the rope rows of each q head (the last
// qk_rope_head_dim of nope + rope) and of kv_a_proj_with_mqa (after kv_lora_rank) into
// llama.cpp's adjacent pairs.
Result<GgufTensorInfo> permute_mla_rope(GgufTensorInfo g, const SafetensorsTensor& t, const std::string& file,
                                        const Hparams& h, Storage& storage) {
  const bool kv = g.name.find("attn_kv_a_mqa") != std::string::npos;
  const int64_t rows = t.shape.empty() ? 0 : t.shape[0], group = kv ? rows : h.qk_nope + h.n_rot;
  const int64_t row_bytes = rows > 0 ? int64_t(t.n_bytes) / rows : 0;
  if (t.shape.size() != 2 || group <= 0 || rows % group != 0 || (kv && rows != h.kv_lora_rank + h.n_rot))
    return corrupt(file + ": tensor '" + t.name + "' has " + std::to_string(rows) + " rows, not whole heads");
  std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
  for (int64_t start = group - h.n_rot; start < rows; start += group) {
    const auto rope = permute_rows_for_rope(t.data + start * row_bytes, h.n_rot, row_bytes, h.n_rot);
    std::memcpy(bytes.data() + start * row_bytes, rope.data(), rope.size());
  }
  return owned(g.name, g.type, g.dims, std::move(bytes), storage);
}

// ---- gpt-oss experts. ----

// Rows first_row, first_row + step, ... of each expert of MXFP4 `blocks` [n][rows][nb][16] and
// `scales` [n][rows][nb] (openai's layout: byte i holds element 2i low, 2i + 1 high) as ggml's
// MXFP4 blocks: the E8M0 scale byte, then 16 bytes with elements 0..15 low and 16..31 high. The
// scale byte is the same: ggml's doubled e2m1 values times 2^(e - 128) are openai's times 2^(e - 127).
std::vector<uint8_t> repack_mxfp4(const SafetensorsTensor& blocks, const SafetensorsTensor& scales, int64_t first_row,
                                  int64_t step) {
  const int64_t n = blocks.shape[0], rows = blocks.shape[1], nb = blocks.shape[2];
  std::vector<uint8_t> out;
  out.reserve(size_t(n * (rows / step) * nb * 17));
  for (int64_t e = 0; e < n; ++e)
    for (int64_t r = first_row; r < rows; r += step)
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t at = (e * rows + r) * nb + b;
        const uint8_t* q = blocks.data + at * 16;
        auto element = [&](int64_t k) { return k % 2 == 0 ? q[k / 2] & 0x0F : q[k / 2] >> 4; };
        out.push_back(scales.data[at]);
        for (int64_t j = 0; j < 16; ++j) out.push_back(uint8_t(element(j) | element(16 + j) << 4));
      }
  return out;
}

Result<std::vector<GgufTensorInfo>> mxfp4_experts(const std::string& blk, const std::string& proj,
                                                  const Mxfp4Parts& parts, Storage& storage) {
  const ExpertPart& known = parts.blocks.tensor ? parts.blocks : parts.scales;
  if (!parts.blocks.tensor || !parts.scales.tensor)
    return corrupt(known.file + ": tensor '" + known.tensor->name + "' has no " +
                   (parts.blocks.tensor ? "_scales" : "_blocks") + " partner");
  const SafetensorsTensor &b = *parts.blocks.tensor, &sc = *parts.scales.tensor;
  const bool gate_up = proj == "gate_up";
  if (b.dtype != "U8" || sc.dtype != "U8" || b.shape.size() != 4 || b.shape[3] != 16 || sc.shape.size() != 3 ||
      sc.shape[0] != b.shape[0] || sc.shape[1] != b.shape[1] || sc.shape[2] != b.shape[2] ||
      (gate_up && b.shape[1] % 2 != 0))
    return corrupt(parts.blocks.file + ": tensors '" + b.name + "' [experts, rows, blocks, 16] and '" + sc.name +
                   "' [experts, rows, blocks] must be U8 and agree");
  const int64_t n = b.shape[0], cols = b.shape[2] * 32, step = gate_up ? 2 : 1, rows = b.shape[1] / step;
  std::vector<GgufTensorInfo> out;
  if (gate_up) {
    out.push_back(
        owned(blk + "ffn_gate_exps.weight", DType::MXFP4, {cols, rows, n}, repack_mxfp4(b, sc, 0, 2), storage));
    out.push_back(owned(blk + "ffn_up_exps.weight", DType::MXFP4, {cols, rows, n}, repack_mxfp4(b, sc, 1, 2), storage));
  } else {
    out.push_back(
        owned(blk + "ffn_down_exps.weight", DType::MXFP4, {cols, rows, n}, repack_mxfp4(b, sc, 0, 1), storage));
  }
  return out;
}

// [n][a][b] -> [n][k][a] taking b-columns first, first + step, ... (dense gpt-oss experts store
// [experts, in, out], gate and up interleaved along out); biases [n][b] as a == 1.
std::vector<uint8_t> select_transposed(const SafetensorsTensor& t, int64_t eb, int64_t first, int64_t step) {
  const int64_t n = t.shape[0], a = t.shape.size() == 3 ? t.shape[1] : 1, b = t.shape.back();
  std::vector<uint8_t> out;
  out.reserve(size_t(n * a * (b / step) * eb));
  for (int64_t e = 0; e < n; ++e)
    for (int64_t k = first; k < b; k += step)
      for (int64_t i = 0; i < a; ++i) {
        const uint8_t* src = t.data + ((e * a + i) * b + k) * eb;
        out.insert(out.end(), src, src + eb);
      }
  return out;
}

// gpt-oss's mlp.experts.* tensors other than MXFP4: biases and dequantized weights.
Result<std::vector<GgufTensorInfo>> gpt_oss_dense(const SafetensorsTensor& t, const std::string& file,
                                                  const std::string& blk, const std::string& what, Storage& storage) {
  AUTOGLM_ASSIGN_OR_RETURN(const DType type, weight_dtype(t, file));
  const int64_t eb = element_bytes(type);
  const bool bias = ends_with(what, "_bias"), gate_up = what.compare(0, 7, "gate_up") == 0;
  if (t.shape.size() != (bias ? 2u : 3u) || (gate_up && t.shape.back() % 2 != 0))
    return corrupt(file + ": tensor '" + t.name + "' must be [experts, " + (bias ? "out]" : "in, out]"));
  const int64_t n = t.shape[0], out_dim = t.shape.back() / (gate_up ? 2 : 1), in = bias ? 0 : t.shape[1];
  const std::string suffix = bias ? ".bias" : ".weight";
  const std::vector<int64_t> dims = bias ? std::vector<int64_t>{out_dim, n} : std::vector<int64_t>{in, out_dim, n};
  std::vector<GgufTensorInfo> out;
  if (gate_up) {
    out.push_back(owned(blk + "ffn_gate_exps" + suffix, type, dims, select_transposed(t, eb, 0, 2), storage));
    out.push_back(owned(blk + "ffn_up_exps" + suffix, type, dims, select_transposed(t, eb, 1, 2), storage));
  } else {
    out.push_back(owned(blk + "ffn_down_exps" + suffix, type, dims, select_transposed(t, eb, 0, 1), storage));
  }
  return out;
}

// A gpt-oss mlp.experts.* tensor: MXFP4 halves set aside in `pending`, the rest converted.
Result<std::vector<GgufTensorInfo>> gpt_oss_experts(const SafetensorsTensor& t, const std::string& file,
                                                    const std::string& blk, const std::string& what, Pending& pending,
                                                    Storage& storage) {
  for (const char* proj : {"gate_up", "down"}) {
    const std::string p = std::string(proj) + "_proj";
    if (what == p + "_blocks" || what == p + "_scales") {
      Mxfp4Parts& parts = pending.mxfp4[blk][proj];
      (what == p + "_blocks" ? parts.blocks : parts.scales) = {&t, file};
      return std::vector<GgufTensorInfo>{};
    }
    if (what == p + "_bias" || what == p) return gpt_oss_dense(t, file, blk, what, storage);
  }
  return std::vector<GgufTensorInfo>{};
}

// The GGUF tensors one HF tensor becomes (none when the decoder does not use it); routed
// experts are set aside in `pending`, to be stacked once all are seen.
Result<std::vector<GgufTensorInfo>> map_any(const SafetensorsTensor& t, const std::string& file,
                                            const HfArchitecture& arch, const Hparams& h, Pending& pending,
                                            Storage& storage) {
  std::vector<GgufTensorInfo> out;
  int64_t layer = -1;
  std::string suffix;
  if (split_layer_name(arch, t.name, layer, suffix)) {
    if (layer >= h.n_layer + h.n_nextn) return out;  // NextN layers llama.cpp's converter drops too
    const std::string blk = "blk." + std::to_string(layer) + ".";
    std::string gguf;
    int64_t expert = 0;
    if (arch.gpt_oss_experts && suffix.compare(0, arch.experts.prefix.size(), arch.experts.prefix) == 0)
      return gpt_oss_experts(t, file, blk, suffix.substr(arch.experts.prefix.size()), pending, storage);
    if (expert_part(arch.experts, suffix, gguf, expert)) {
      pending.experts[blk + gguf][expert] = {&t, file};
      return out;
    }
    if (!arch.experts.prefix.empty() &&
        (suffix == arch.experts.prefix + "gate_up_proj" || suffix == "mlp.experts.gate_up_proj"))
      return split_gate_up(t, file, blk, storage);
    if (!arch.experts.prefix.empty() &&
        (suffix == arch.experts.prefix + "down_proj" || suffix == "mlp.experts.down_proj")) {
      AUTOGLM_ASSIGN_OR_RETURN(GgufTensorInfo g, map_tensor(t, file, blk + "ffn_down_exps.weight", arch, h, storage));
      out.push_back(std::move(g));
      return out;
    }
  }
  const std::string name = gguf_name(arch, t.name);
  if (name.empty()) return out;  // not used by the decoder (e.g. rotary inv_freq buffers)
  if (ends_with(name, "attn_kv_b.weight"))
    return split_kv_b(t, file, name.substr(0, name.size() - std::string("attn_kv_b.weight").size()), h, storage);
  AUTOGLM_ASSIGN_OR_RETURN(GgufTensorInfo g, map_tensor(t, file, name, arch, h, storage));
  const bool mla_rope =
      ends_with(name, "attn_q.weight") || ends_with(name, "attn_q_b.weight") || ends_with(name, "attn_kv_a_mqa.weight");
  if (arch.mla && !h.rope_interleave && mla_rope) {
    AUTOGLM_ASSIGN_OR_RETURN(g, permute_mla_rope(std::move(g), t, file, h, storage));
  }
  out.push_back(std::move(g));
  return out;
}

}  // namespace

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec);
}

namespace {

// A vision-language config's decoder fields: text_config over the top level (older folders
// keep them all at the top).
json text_fields(const json& j) {
  json merged = j;
  merged.erase("vision_config");
  merged.erase("text_config");
  if (j.contains("text_config") && j["text_config"].is_object())
    for (const auto& [key, value] : j["text_config"].items()) merged[key] = value;
  return merged;
}

Result<std::unique_ptr<GgufFile>> open_checked(const std::string& dir) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  AUTOGLM_ASSIGN_OR_RETURN(json j, read_json_file(config_path));
  if (!j.is_object()) return corrupt(config_path + ": expected a JSON object");
  const Config config(j, config_path);
  const json* names = config.find({"architectures"});
  if (!names || !names->is_array() || names->empty() || !(*names)[0].is_string())
    return corrupt(config_path + ": field 'architectures' must be a non-empty list of names");
  const std::string hf_name = (*names)[0].get<std::string>();
  const HfArchitecture* arch = find_hf_architecture(hf_name);
  if (!arch)
    return unsupported(config_path + ": architecture '" + hf_name +
                       "' is not supported (supported: " + supported_hf_architectures() + ")");
  std::vector<float> rope_factors;
  Hparams h{};
  const Config text_config(arch->vision_language ? text_fields(j) : j, config_path);
  AUTOGLM_ASSIGN_OR_RETURN(Metadata md, metadata_from_config(text_config, *arch, dir, rope_factors, h));

  auto storage = std::make_shared<Storage>();
  AUTOGLM_ASSIGN_OR_RETURN(storage->checkpoint, SafetensorsCheckpoint::open_folder(dir));
  std::vector<GgufTensorInfo> tensors;
  Pending pending;
  std::deque<SafetensorsTensor> renamed;  // text tensors of a vision-language folder, under decoder names
  for (const auto& file : storage->checkpoint->files())
    for (const SafetensorsTensor& t : file->tensors()) {
      const SafetensorsTensor* text = &t;
      if (arch->vision_language) {
        const std::string name = text_tensor_name(*arch, t.name);
        if (name.empty()) continue;  // the vision tower's (hf_vision.h)
        renamed.push_back(t);
        renamed.back().name = name;
        text = &renamed.back();
      }
      AUTOGLM_ASSIGN_OR_RETURN(auto mapped, map_any(*text, file->path(), *arch, h, pending, *storage));
      for (GgufTensorInfo& g : mapped) tensors.push_back(std::move(g));
    }
  for (const auto& [name, parts] : pending.experts) {
    AUTOGLM_ASSIGN_OR_RETURN(GgufTensorInfo g, stack_experts(name, parts, h.n_expert, *storage));
    tensors.push_back(std::move(g));
  }
  for (const auto& [blk, projections] : pending.mxfp4)
    for (const auto& [proj, parts] : projections) {
      AUTOGLM_ASSIGN_OR_RETURN(auto mapped, mxfp4_experts(blk, proj, parts, *storage));
      for (GgufTensorInfo& g : mapped) tensors.push_back(std::move(g));
    }
  if (!rope_factors.empty()) {
    std::vector<uint8_t> bytes(rope_factors.size() * 4);
    std::memcpy(bytes.data(), rope_factors.data(), bytes.size());
    storage->buffers.push_back(std::move(bytes));
    tensors.push_back({"rope_freqs.weight",
                       DType::F32,
                       {int64_t(rope_factors.size())},
                       0,
                       storage->buffers.back().data(),
                       storage->buffers.back().size()});
  }
  return GgufFile::from_parts(dir, std::move(md), std::move(tensors), storage);
}

}  // namespace

Result<std::unique_ptr<GgufFile>> open_hf_checkpoint(const std::string& dir) {
  try {
    return open_checked(dir);
  } catch (const nlohmann::json::exception& e) {  // a field with a value of the wrong type
    return corrupt(dir + "/config.json: a field has a value of the wrong type (" + e.what() + ")");
  }
}

Result<GenerationDefaults> read_generation_config(const std::string& dir) {
  GenerationDefaults d;
  const std::string path = (fs::path(dir) / "generation_config.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return d;
  AUTOGLM_ASSIGN_OR_RETURN(json j, read_json_file(path));
  if (!j.is_object()) return corrupt(path + ": expected a JSON object");
  auto number = [&](const char* key, std::optional<double>& out) -> Status {
    if (!j.contains(key) || j[key].is_null()) return Status::ok();
    if (!j[key].is_number()) return corrupt(path + ": field '" + key + "' must be a number");
    out = j[key].get<double>();
    return Status::ok();
  };
  AUTOGLM_RETURN_IF_ERROR(number("temperature", d.temperature));
  AUTOGLM_RETURN_IF_ERROR(number("top_p", d.top_p));
  AUTOGLM_RETURN_IF_ERROR(number("repetition_penalty", d.repetition_penalty));
  if (j.contains("top_k") && !j["top_k"].is_null()) {
    if (!j["top_k"].is_number_integer()) return corrupt(path + ": field 'top_k' must be an integer");
    d.top_k = j["top_k"].get<int64_t>();
  }
  if (j.contains("do_sample") && j["do_sample"].is_boolean()) d.greedy = !j["do_sample"].get<bool>();
  const json eos = j.value("eos_token_id", json());
  for (const json& e : eos.is_array() ? eos : json::array({eos})) {
    if (e.is_null()) continue;
    if (!e.is_number_integer()) return corrupt(path + ": field 'eos_token_id' must be an id or a list of ids");
    d.eos_ids.push_back(e.get<int32_t>());
  }
  return d;
}

}  // namespace autoglm
