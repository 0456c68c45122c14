#include "model/quant_mix.h"

#include <algorithm>
#include <cctype>

#include "formats/gguf.h"

namespace autoglm {
namespace {

using M = QuantMix;

const std::vector<QuantMixInfo> kMixes = {
    {M::kF32, "F32", 0, DType::F32},
    {M::kF16, "F16", 1, DType::F16},
    {M::kBF16, "BF16", 32, DType::BF16},
    {M::kQ4_0, "Q4_0", 2, DType::Q4_0},
    {M::kQ4_1, "Q4_1", 3, DType::Q4_1},
    {M::kQ8_0, "Q8_0", 7, DType::Q8_0},
    {M::kQ5_0, "Q5_0", 8, DType::Q5_0},
    {M::kQ5_1, "Q5_1", 9, DType::Q5_1},
    {M::kQ2_K, "Q2_K", 10, DType::Q2_K},
    {M::kQ3_K_S, "Q3_K_S", 11, DType::Q3_K},
    {M::kQ3_K_M, "Q3_K_M", 12, DType::Q3_K},
    {M::kQ3_K_L, "Q3_K_L", 13, DType::Q3_K},
    {M::kQ4_K_S, "Q4_K_S", 14, DType::Q4_K},
    {M::kQ4_K_M, "Q4_K_M", 15, DType::Q4_K},
    {M::kQ5_K_S, "Q5_K_S", 16, DType::Q5_K},
    {M::kQ5_K_M, "Q5_K_M", 17, DType::Q5_K},
    {M::kQ6_K, "Q6_K", 18, DType::Q6_K},
    {M::kIQ2_XXS, "IQ2_XXS", 19, DType::IQ2_XXS},
    {M::kIQ2_XS, "IQ2_XS", 20, DType::IQ2_XS},
    {M::kQ2_K_S, "Q2_K_S", 21, DType::Q2_K},
    {M::kIQ3_XS, "IQ3_XS", 22, DType::IQ3_S},
    {M::kIQ3_XXS, "IQ3_XXS", 23, DType::IQ3_XXS},
    {M::kIQ1_S, "IQ1_S", 24, DType::IQ1_S},
    {M::kIQ4_NL, "IQ4_NL", 25, DType::IQ4_NL},
    {M::kIQ3_S, "IQ3_S", 26, DType::IQ3_S},
    {M::kIQ3_M, "IQ3_M", 27, DType::IQ3_S},
    {M::kIQ2_S, "IQ2_S", 28, DType::IQ2_XS},
    {M::kIQ2_M, "IQ2_M", 29, DType::IQ2_S},
    {M::kIQ4_XS, "IQ4_XS", 30, DType::IQ4_XS},
    {M::kIQ1_M, "IQ1_M", 31, DType::IQ1_M},
    {M::kTQ1_0, "TQ1_0", 36, DType::TQ1_0},
    {M::kTQ2_0, "TQ2_0", 37, DType::TQ2_0},
    {M::kMXFP4_MOE, "MXFP4_MOE", 38, DType::MXFP4},
};

enum class Category { kOutput, kTokenEmbd, kAttnV, kAttnK, kAttnQ, kAttnOutput, kFfnUp, kFfnGate, kFfnDown, kOther };

bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

// First match wins: the fused QKV and MLA's kv_b count as attention values.
Category category(const std::string& name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::kTokenEmbd;
  if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") || contains(name, "attn_v.weight"))
    return Category::kAttnV;
  if (contains(name, "attn_k.weight")) return Category::kAttnK;
  if (contains(name, "attn_q.weight")) return Category::kAttnQ;
  if (contains(name, "attn_output.weight")) return Category::kAttnOutput;
  if (contains(name, "ffn_up")) return Category::kFfnUp;
  if (contains(name, "ffn_gate")) return Category::kFfnGate;
  if (contains(name, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

// The block number of "blk.N.", or -1.
int64_t layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int64_t n = 0;
  size_t i = 4;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) n = 10 * n + (name[i] - '0');
  return i > 4 && i < name.size() && name[i] == '.' ? n : -1;
}

// Layers that get more bits: the first and last eighth and every third one between.
bool more_bits(int64_t i, int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

struct ModelFacts {
  std::string arch;
  int64_t n_layer = 0, n_gqa = 0, n_expert = 0, n_attention_wv = 0;
  bool is_70b = false, falcon = false, tied = false;
};

ModelFacts model_facts(const GgufFile& file) {
  ModelFacts f;
  f.arch = file.get_string("general.architecture").value_or("");
  f.n_layer = file.get_int(f.arch + ".block_count").value_or(0);
  const int64_t n_head = file.get_int(f.arch + ".attention.head_count").value_or(0);
  const int64_t n_head_kv = file.get_int(f.arch + ".attention.head_count_kv").value_or(n_head);
  f.n_gqa = n_head_kv > 0 ? n_head / n_head_kv : 0;
  f.n_expert = file.get_int(f.arch + ".expert_count").value_or(0);
  const int64_t base_layers = f.n_layer - file.get_int(f.arch + ".nextn_predict_layers").value_or(0);
  f.is_70b = (f.arch == "llama" && base_layers == 80 && n_head != n_head_kv && f.n_expert != 8) ||
             ((f.arch == "qwen2" || f.arch == "deci" || f.arch == "olmo") && base_layers == 80) ||
             (f.arch == "jais2" && base_layers == 68);
  f.falcon = f.arch == "falcon";
  f.tied = file.find_tensor("output.weight") == nullptr;
  for (const auto& t : file.tensors()) f.n_attention_wv += category(t.name) == Category::kAttnV;
  return f;
}

bool is_block_type(DType t) {
  return dtype_info(t).block_elems > 1;
}

bool fits(DType t, int64_t ne0) {
  return ne0 % dtype_info(t).block_elems == 0;
}

// One level of fallback for rows that are not whole blocks, then F16.
DType fallback_type(DType t, int64_t ne0) {
  switch (t) {
    case DType::IQ1_S:
    case DType::IQ1_M:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ4_XS: t = DType::IQ4_NL; break;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::TQ1_0:
    case DType::TQ2_0: t = DType::Q4_0; break;
    case DType::Q4_K: t = DType::Q5_0; break;
    case DType::Q5_K: t = DType::Q5_1; break;
    case DType::Q6_K: t = DType::Q8_0; break;
    default: break;
  }
  return fits(t, ne0) ? t : DType::F16;
}

class MixPlanner {
 public:
  MixPlanner(QuantMix mix, const MixChoices& c, const ModelFacts& f)
      : mix_(mix), base_(quant_mix_info(mix).base), c_(c), f_(f) {}

  // The type of a tensor the mix quantizes, and whether it is taken as given (no fallback).
  Result<std::pair<DType, bool>> choose(const GgufTensorInfo& t) {
    const Category cat = category(t.name);
    if (cat == Category::kTokenEmbd && c_.token_embedding_type) return std::pair{*c_.token_embedding_type, true};
    if (t.name == "output.weight" && c_.output_type) return std::pair{*c_.output_type, true};
    if (c_.pure || !is_block_type(base_)) return std::pair{base_, false};
    AUTOGLM_ASSIGN_OR_RETURN(const DType type, by_rules(t, cat));
    return std::pair{type, false};
  }

 private:
  bool is(std::initializer_list<QuantMix> mixes) const {
    return std::find(mixes.begin(), mixes.end(), mix_) != mixes.end();
  }
  bool gqa4() const { return f_.n_gqa >= 4; }
  bool moe8() const { return f_.n_expert == 8; }

  Result<DType> by_rules(const GgufTensorInfo& t, Category cat) {
    if (cat == Category::kOutput || (cat == Category::kTokenEmbd && f_.tied)) return output_type(t);
    if (mix_ == M::kMXFP4_MOE) return t.dims.size() > 2 && t.dims[2] > 1 ? DType::MXFP4 : DType::Q8_0;
    if (cat == Category::kTokenEmbd) return embedding_type();
    if (is({M::kIQ2_XXS, M::kIQ2_XS, M::kIQ1_S, M::kIQ1_M, M::kIQ2_S, M::kIQ2_M})) return lowest_bits_type(cat);
    switch (cat) {
      case Category::kAttnV: return attn_v_type();
      case Category::kAttnK: return moe8() ? DType::Q8_0 : attn_qk_type();
      case Category::kAttnQ: return attn_qk_type();
      case Category::kFfnDown: return ffn_down_type(t);
      case Category::kAttnOutput: return attn_output_type();
      case Category::kFfnGate:
      case Category::kFfnUp: return ffn_gate_up_type(t, cat == Category::kFfnGate ? i_ffn_gate_ : i_ffn_up_);
      default: return base_;
    }
  }

  DType output_type(const GgufTensorInfo& t) const {
    if (c_.output_type) return *c_.output_type;  // a tied embedding
    if (mix_ == M::kMXFP4_MOE || f_.falcon || !fits(base_, t.dims[0])) return DType::Q8_0;
    if (is({M::kIQ2_XXS, M::kIQ2_XS, M::kIQ3_XXS, M::kIQ1_S, M::kIQ2_S, M::kIQ2_M, M::kIQ1_M})) return DType::Q5_K;
    return base_ == DType::Q8_0 ? base_ : DType::Q6_K;
  }

  DType embedding_type() const {
    if (is({M::kIQ2_XXS, M::kIQ2_XS, M::kIQ1_S, M::kIQ1_M})) return DType::Q2_K;
    if (is({M::kIQ2_S, M::kIQ2_M, M::kIQ3_XXS})) return DType::IQ3_S;
    if (is({M::kTQ1_0, M::kTQ2_0})) return DType::Q4_K;
    return base_;
  }

  // The IQ2 and IQ1 mixes: the value and down projections (first eighth) and the attention
  // output raised; nothing else.
  DType lowest_bits_type(Category cat) {
    const bool iq2_s_or_m = is({M::kIQ2_S, M::kIQ2_M});
    switch (cat) {
      case Category::kAttnV:
        ++i_attention_wv_;
        return gqa4() || f_.n_expert >= 4 ? DType::Q4_K : iq2_s_or_m ? DType::IQ3_S : DType::Q2_K;
      case Category::kAttnK: return moe8() ? DType::Q4_K : base_;
      case Category::kFfnDown: {
        const bool early = i_ffn_down_++ < f_.n_layer / 8;
        return early ? (iq2_s_or_m ? DType::IQ3_S : DType::Q2_K) : base_;
      }
      case Category::kAttnOutput:
        if (moe8()) return DType::Q5_K;
        if (is({M::kIQ1_S, M::kIQ1_M})) return DType::IQ2_XXS;
        return iq2_s_or_m ? DType::IQ3_S : base_;
      default: return base_;
    }
  }

  DType attn_v_type() {
    const int64_t i = i_attention_wv_++;
    DType t = base_;
    switch (mix_) {
      case M::kQ2_K: t = gqa4() ? DType::Q4_K : DType::Q3_K; break;
      case M::kQ2_K_S:
      case M::kIQ3_XS:
      case M::kIQ3_S:
        if (gqa4()) t = DType::Q4_K;
        break;
      case M::kIQ3_XXS: t = gqa4() ? DType::Q4_K : c_.has_imatrix ? DType::IQ3_XXS : DType::IQ3_S; break;
      case M::kIQ3_M: t = DType::Q4_K; break;
      case M::kQ3_K_M: t = i < 2 ? DType::Q5_K : DType::Q4_K; break;
      case M::kQ3_K_L: t = DType::Q5_K; break;
      case M::kIQ4_NL:
      case M::kIQ4_XS:
        if (gqa4()) t = DType::Q5_K;
        break;
      case M::kQ4_K_M:
      case M::kQ5_K_M:
        if (more_bits(i, f_.n_attention_wv)) t = DType::Q6_K;
        break;
      case M::kQ4_K_S:
        if (i < 4) t = DType::Q5_K;
        break;
      default: break;
    }
    if (f_.is_70b && (t == DType::Q3_K || t == DType::Q4_K)) t = DType::Q5_K;
    return moe8() ? DType::Q8_0 : t;
  }

  DType attn_qk_type() const {
    if (mix_ == M::kIQ3_XS) return DType::IQ3_XXS;
    if (mix_ == M::kIQ3_XXS) return DType::IQ2_S;
    return base_;
  }

  // Mixture-of-experts models take the layer from the name (each layer has several such
  // tensors); dense ones count the tensors of the kind.
  Result<int64_t> ffn_layer(const GgufTensorInfo& t, int64_t counter) const {
    if (f_.n_expert <= 1) return counter;
    const int64_t layer = layer_of(t.name);
    if (layer < 0 || layer >= f_.n_layer)
      return invalid_argument("quantize: tensor '" + t.name + "' has no layer number in [0, " +
                              std::to_string(f_.n_layer) + ")");
    return layer;
  }

  Result<DType> ffn_down_type(const GgufTensorInfo& t) {
    AUTOGLM_ASSIGN_OR_RETURN(const int64_t l, ffn_layer(t, i_ffn_down_));
    ++i_ffn_down_;
    const int64_t n = f_.n_layer;
    switch (mix_) {
      case M::kQ2_K: return DType::Q3_K;
      case M::kQ2_K_S: return l < n / 8 ? DType::Q4_K : base_;
      case M::kIQ3_XXS:
        if (c_.has_imatrix) return base_;
        return l < n / 8 ? DType::Q4_K : DType::Q3_K;
      case M::kQ3_K_M:
        if (l < n / 16) return DType::Q5_K;
        return !f_.falcon || more_bits(l, n) ? DType::Q4_K : DType::Q3_K;
      case M::kIQ3_M: return l < n / 8 || (moe8() && more_bits(l, n)) ? DType::Q4_K : base_;
      case M::kQ3_K_L: return f_.falcon ? DType::Q4_K : DType::Q5_K;
      case M::kQ4_K_M:
        if (f_.falcon) return l < n / 16 ? DType::Q6_K : more_bits(l, n) ? DType::Q5_K : DType::Q4_K;
        return more_bits(l, n) ? DType::Q6_K : DType::Q4_K;
      case M::kIQ4_NL:
      case M::kIQ4_XS: return !c_.has_imatrix && l < n / 8 ? DType::Q5_K : base_;
      case M::kQ5_K_M: return more_bits(l, n) ? DType::Q6_K : base_;
      case M::kQ4_K_S: return !f_.falcon && l < n / 8 ? DType::Q5_K : base_;
      case M::kQ4_0: return c_.has_imatrix && l < n / 8 ? DType::Q4_1 : base_;
      case M::kQ5_0: return c_.has_imatrix && l < n / 8 ? DType::Q5_1 : base_;
      default: return base_;
    }
  }

  DType attn_output_type() const {
    if (f_.falcon) return mix_ == M::kQ3_K_L ? DType::Q4_K : base_;
    if (moe8())
      return is({M::kQ2_K, M::kIQ3_XS, M::kIQ3_XXS, M::kQ3_K_S, M::kQ3_K_M, M::kIQ4_NL, M::kQ4_K_S, M::kQ4_K_M,
                 M::kIQ3_S, M::kIQ3_M, M::kIQ4_XS})
                 ? DType::Q5_K
                 : base_;
    switch (mix_) {
      case M::kQ2_K: return DType::Q3_K;
      case M::kIQ3_XXS: return DType::IQ3_S;
      case M::kQ3_K_M:
      case M::kIQ3_M: return DType::Q4_K;
      case M::kQ3_K_L: return DType::Q5_K;
      default: return base_;
    }
  }

  Result<DType> ffn_gate_up_type(const GgufTensorInfo& t, int64_t& counter) {
    AUTOGLM_ASSIGN_OR_RETURN(const int64_t l, ffn_layer(t, counter));
    ++counter;
    const int64_t n = f_.n_layer;
    return mix_ == M::kIQ3_XS && l >= n / 8 && l < 7 * n / 8 ? DType::IQ3_XXS : base_;
  }

  QuantMix mix_;
  DType base_;
  MixChoices c_;
  ModelFacts f_;
  int64_t i_attention_wv_ = 0, i_ffn_down_ = 0, i_ffn_gate_ = 0, i_ffn_up_ = 0;
};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const std::vector<QuantMixInfo>& quant_mixes() {
  return kMixes;
}

std::optional<QuantMix> quant_mix_from_name(std::string_view name) {
  std::string n = upper(name);
  if (n == "Q3_K" || n == "Q4_K" || n == "Q5_K") n += "_M";
  for (const auto& m : kMixes)
    if (m.name == n) return m.mix;
  return std::nullopt;
}

const QuantMixInfo& quant_mix_info(QuantMix mix) {
  for (const auto& m : kMixes)
    if (m.mix == mix) return m;
  return kMixes.front();
}

bool mix_quantizes(const std::string& name, const std::vector<int64_t>& dims) {
  int64_t effective = 0;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] > 1) effective = int64_t(i) + 1;
  if (effective < 2 || name.size() < 6 || name.compare(name.size() - 6, 6, "weight") != 0) return false;
  for (std::string_view never : {"_norm.weight",
                                 "ffn_gate_inp.weight",
                                 "ffn_gate_tid2eid.weight",
                                 "altup",
                                 "laurel",
                                 "per_layer_model_proj",
                                 "ssm_conv1d",
                                 "shortconv.conv.weight",
                                 "indexer.k_proj.weight",
                                 "indexer.q_proj.weight",
                                 "time_mix_",
                                 "attn_rel_b.weight",
                                 ".position_embd",
                                 "sam.pos_embd",
                                 "sam.neck.",
                                 "sam.net_",
                                 ".rel_pos",
                                 ".patch_embd",
                                 ".patch_merger",
                                 "a.rvq.codebook",
                                 "mm.a.code_embd"})
    if (contains(name, never)) return false;
  return name != "position_embd.weight" && name != "token_types.weight";
}

Result<std::map<std::string, TensorChoice>> plan_quant_mix(const GgufFile& file, QuantMix mix,
                                                           const MixChoices& choices) {
  const ModelFacts facts = model_facts(file);
  // llama-quantize's order: tensors outside the blocks first, then block by block, by name.
  std::vector<const GgufTensorInfo*> order;
  for (const auto& t : file.tensors()) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const GgufTensorInfo* a, const GgufTensorInfo* b) {
    const int64_t la = layer_of(a->name), lb = layer_of(b->name);
    return la != lb ? la < lb : a->name < b->name;
  });
  MixPlanner planner(mix, choices, facts);
  std::map<std::string, TensorChoice> plan;
  for (const GgufTensorInfo* t : order) {
    if (!mix_quantizes(t->name, t->dims) || (choices.leave_output && t->name == "output.weight")) continue;
    AUTOGLM_ASSIGN_OR_RETURN(const auto chosen, planner.choose(*t));
    TensorChoice c{chosen.first};
    if (!chosen.second && !fits(c.type, t->dims[0])) c.type = fallback_type(c.type, t->dims[0]), c.fallback = true;
    plan[t->name] = c;
  }
  return plan;
}

bool tensor_needs_imatrix(DType t, std::optional<QuantMix> mix, const std::string& name) {
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight" || name == "output.weight") return false;
  return t == DType::IQ3_XXS || t == DType::IQ2_XXS || t == DType::IQ2_XS || t == DType::IQ2_S || t == DType::IQ1_S ||
         t == DType::IQ1_M || (t == DType::Q2_K && mix == M::kQ2_K_S);
}

}  // namespace autoglm
