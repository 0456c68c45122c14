// A float64 forward pass written from the Hugging Face modelling code of the supported
// architectures (Llama, Mistral with its sliding window, Qwen2, Qwen3, GLM-4-0414, and the
// mixture-of-experts families: Mixtral, Qwen2-MoE, Qwen3-MoE, GLM-4.5 (Glm4Moe),
// DeepSeek-V2/V3 and GLM-4.7-Flash (Glm4MoeLite) with latent attention): HF tensor names
// (per-expert tensors, kv_b_proj unsplit), HF RoPE conventions (rotate_half, or GLM's
// interleaved pairs on the first partial_rotary_factor of each head, or DeepSeek's
// interleaved rope part), HF rope_scaling, HF routers. It shares nothing with the engine's
// mapping onto GGUF, so the two checking each other tests that mapping too.
//
// DeepSeek's rope: modeling_deepseek_v3 (rope_interleave, the default) rotates the pairs
// (2i, 2i+1) of the rope part by frequency i and writes the results de-interleaved (evens
// then odds); modeling_deepseek_v2 does the same as a complex product without the reorder.
// Either way q_pe.k_pe is the dot product of adjacent-pair rotations, which is what
// llama.cpp's NORM rope computes on the unpermuted weights: its converter does not permute
// q_b_proj or kv_a_proj_with_mqa, and neither does the engine (only rope_interleave: false,
// rotate_half on the rope part, needs its rope rows permuted into adjacent pairs).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/half.h"
#include "formats/safetensors.h"
#include "test_util.h"

namespace autoglm::test {

class HfReference {
 public:
  // `dir` holds config.json and model.safetensors (F32 or BF16).
  explicit HfReference(const std::string& dir) {
    config_ = nlohmann::json::parse(read_file(dir + "/config.json"));
    if (config_.contains("text_config"))  // a vision-language model: the decoder's fields
      for (const auto& [key, value] : config_["text_config"].items()) config_[key] = value;
    auto ck = SafetensorsCheckpoint::open_folder(dir);
    EXPECT_TRUE(ck.is_ok()) << ck.status().message();
    for (const auto& f : (*ck)->files())
      for (const auto& t : f->tensors()) {
        if (t.dtype == "U8")
          raw_[t.name] = std::vector<uint8_t>(t.data, t.data + t.n_bytes);
        else
          tensors_[decoder_name(t.name)] = to_double(t);
      }
    if (arch() == "GptOssForCausalLM") dequantize_gpt_oss_experts();
  }

  // MXFP4 experts multiply 8-bit-quantized activations, as llama.cpp computes them.
  void quantize_mxfp4_activations(bool on) { q8_mxfp4_ = on; }

  // Vision-language models: the input embeddings of some positions (an image's, in place of
  // its placeholder tokens' rows: null keeps the token's) and every position's (t, h, w) for
  // M-RoPE (rope_scaling.mrope_section); both set for the next forward.
  void set_multimodal(std::vector<const double*> embeds, std::vector<std::array<double, 3>> positions) {
    embeds_ = std::move(embeds);
    mrope_ = std::move(positions);
  }

  // Logits of every position, [tokens.size()][vocab]; `hidden` (optional) gets the final
  // normed hidden state of every position, [tokens.size()][hidden_size].
  std::vector<double> forward(const std::vector<int32_t>& tokens, std::vector<double>* hidden = nullptr) const {
    const auto& c = config_;
    const size_t d = c["hidden_size"], n_layer = c["num_hidden_layers"], vocab = c["vocab_size"];
    const double eps = c.value("rms_norm_eps", 1e-6);
    const auto& embed = t("model.embed_tokens.weight");
    const auto& head = tensors_.count("lm_head.weight") ? t("lm_head.weight") : embed;

    Cache cache(n_layer);
    std::vector<double> logits;
    for (size_t p = 0; p < tokens.size(); ++p) {
      std::vector<double> x(embed.begin() + long(size_t(tokens[p]) * d),
                            embed.begin() + long((size_t(tokens[p]) + 1) * d));
      if (p < embeds_.size() && embeds_[p]) x.assign(embeds_[p], embeds_[p] + d);
      for (size_t il = 0; il < n_layer; ++il) {
        const std::string L = "model.layers." + std::to_string(il) + ".";
        auto h = rmsnorm(x, t(L + "input_layernorm.weight"), eps);
        auto o = mla() ? mla_attention(L, h, p, cache[il]) : attention(L, h, p, cache[il]);
        if (glm4()) o = rmsnorm(o, t(L + "post_self_attn_layernorm.weight"), eps);
        for (size_t i = 0; i < d; ++i) x[i] += o[i];
        h = rmsnorm(x, t(L + "post_attention_layernorm.weight"), eps);
        auto m = is_moe_layer(L) ? moe(L, h) : mlp(L + "mlp.", h);
        if (glm4()) m = rmsnorm(m, t(L + "post_mlp_layernorm.weight"), eps);
        for (size_t i = 0; i < d; ++i) x[i] += m[i];
      }
      x = rmsnorm(x, t("model.norm.weight"), eps);
      if (hidden) hidden->insert(hidden->end(), x.begin(), x.end());
      for (size_t r = 0; r < vocab; ++r) {
        double s = 0;
        for (size_t i = 0; i < d; ++i) s += head[r * d + i] * x[i];
        logits.push_back(s);
      }
    }
    return logits;
  }

  // x / sqrt(mean(x^2) + eps) * w, as transformers' RMSNorm (the vision reference's too).
  static std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w, double eps) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double s = 1.0 / std::sqrt(ss / double(x.size()) + eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * w[i];
    return y;
  }

 private:
  // Per layer: the keys and values of every position so far, per head concatenated.
  struct LayerCache {
    std::vector<std::vector<double>> k, v;
  };
  using Cache = std::vector<LayerCache>;

  std::string arch() const { return config_["architectures"][0]; }
  bool glm4() const { return arch() == "Glm4ForCausalLM" || arch() == "Glm4vForConditionalGeneration"; }
  // transformers 4.52+ keeps a vision-language model's decoder under model.language_model.
  static std::string decoder_name(const std::string& name) {
    const std::string moved = "model.language_model.";
    return name.rfind(moved, 0) == 0 ? "model." + name.substr(moved.size()) : name;
  }
  // The rotation angle's position for pair i at position p: M-RoPE's axis of the pair
  // (mrope_section runs of t, h, w over the pairs), else p.
  double rope_position(size_t p, size_t i) const {
    if (p >= mrope_.size()) return double(p);
    const auto& sec = config_["rope_scaling"]["mrope_section"];
    const size_t t = sec[0], h = sec[1];
    return mrope_[p][i < t ? 0 : i < t + h ? 1 : 2];
  }
  bool mla() const { return config_.contains("kv_lora_rank"); }
  bool is_moe_layer(const std::string& L) const {
    return tensors_.count(L + "mlp.gate.weight") || tensors_.count(L + "block_sparse_moe.gate.weight") ||
           tensors_.count(L + "mlp.router.weight");
  }

  // Causal softmax attention of one query head over the cached positions [first, p].
  // `sink` (gpt-oss): a logit that joins the softmax's denominator and adds no value.
  static void attend(const double* q, const LayerCache& cache, size_t k_off, size_t v_off, size_t dk, size_t dv,
                     size_t first, double scale, double* out, const double* sink = nullptr) {
    const size_t p = cache.k.size() - 1;
    std::vector<double> sc;
    double mx = -1e300, sum = 0;
    for (size_t j = first; j <= p; ++j) {
      double dot = 0;
      for (size_t e = 0; e < dk; ++e) dot += q[e] * cache.k[j][k_off + e];
      sc.push_back(dot * scale);
      mx = std::max(mx, sc.back());
    }
    if (sink) mx = std::max(mx, *sink);
    for (double& s : sc) sum += s = std::exp(s - mx);
    if (sink) sum += std::exp(*sink - mx);
    for (size_t j = first; j <= p; ++j)
      for (size_t e = 0; e < dv; ++e) out[e] += sc[j - first] / sum * cache.v[j][v_off + e];
  }

  static size_t layer_index(const std::string& L) {
    return size_t(std::stoul(L.substr(std::string("model.layers.").size())));
  }

  // Llama/Qwen/GLM attention: q, k, v projections (+ biases), optional q/k norms, RoPE, GQA.
  std::vector<double> attention(const std::string& L, const std::vector<double>& h, size_t p, LayerCache& cache) const {
    const auto& c = config_;
    const size_t d = c["hidden_size"], nh = c["num_attention_heads"];
    const size_t nkv = c.value("num_key_value_heads", nh), hd = c.value("head_dim", d / nh);
    const double eps = c.value("rms_norm_eps", 1e-6);
    size_t window = c.contains("sliding_window") && c["sliding_window"].is_number() ? size_t(c["sliding_window"]) : 0;
    if (c.contains("layer_types") && c["layer_types"][layer_index(L)] == "full_attention") window = 0;
    const auto inv_freq = rope_inv_freq(hd);
    const size_t rot = 2 * inv_freq.size();
    auto q = linear(L + "self_attn.q_proj", h), k = linear(L + "self_attn.k_proj", h),
         v = linear(L + "self_attn.v_proj", h);
    for (size_t hh = 0; hh < nh; ++hh)
      head_rope(q, hh * hd, L + "self_attn.q_norm.weight", hd, rot, inv_freq, p, glm4(), eps);
    for (size_t hh = 0; hh < nkv; ++hh)
      head_rope(k, hh * hd, L + "self_attn.k_norm.weight", hd, rot, inv_freq, p, glm4(), eps);
    cache.k.push_back(k);
    cache.v.push_back(v);
    std::vector<double> att(nh * hd, 0.0);
    const size_t first = window > 0 && p + 1 > window ? p + 1 - window : 0;
    const bool sinks = tensors_.count(L + "self_attn.sinks") > 0;
    for (size_t hh = 0; hh < nh; ++hh) {
      const size_t g = hh / (nh / nkv);
      attend(&q[hh * hd], cache, g * hd, g * hd, hd, hd, first, 1.0 / std::sqrt(double(hd)), &att[hh * hd],
             sinks ? &t(L + "self_attn.sinks")[hh] : nullptr);
    }
    return linear(L + "self_attn.o_proj", att);
  }

  // DeepSeek's multi-head latent attention, un-absorbed as modeling_deepseek_v3 computes it:
  // q = q_b(norm(q_a h)) (or q_proj h) per head [q_nope | q_rope]; [c | k_rope] = kv_a h,
  // c normed, [k_nope | v] per head = kv_b c; k_rope shared by all heads.
  std::vector<double> mla_attention(const std::string& L, const std::vector<double>& h, size_t p,
                                    LayerCache& cache) const {
    const auto& c = config_;
    const size_t nh = c["num_attention_heads"], lora = c["kv_lora_rank"], nope = c["qk_nope_head_dim"],
                 rope = c["qk_rope_head_dim"], vd = c["v_head_dim"], qk = nope + rope;
    const bool interleave = c.value("rope_interleave", true);
    const double eps = 1e-6;  // q_a_layernorm and kv_a_layernorm use RMSNorm's default eps in HF
    std::vector<double> q;
    if (tensors_.count(L + "self_attn.q_a_proj.weight"))
      q = linear(L + "self_attn.q_b_proj",
                 rmsnorm(linear(L + "self_attn.q_a_proj", h), t(L + "self_attn.q_a_layernorm.weight"), eps));
    else
      q = linear(L + "self_attn.q_proj", h);
    const auto ckv = linear(L + "self_attn.kv_a_proj_with_mqa", h);
    const std::vector<double> latent(ckv.begin(), ckv.begin() + long(lora));
    std::vector<double> k_rope(ckv.begin() + long(lora), ckv.end());
    const auto kv = linear(L + "self_attn.kv_b_proj", rmsnorm(latent, t(L + "self_attn.kv_a_layernorm.weight"), eps));
    double base = c.value("rope_theta", 10000.0);
    if (c.contains("rope_parameters") && c["rope_parameters"].contains("rope_theta"))
      base = c["rope_parameters"]["rope_theta"];
    std::vector<double> inv(rope / 2);
    for (size_t i = 0; i < inv.size(); ++i) inv[i] = 1.0 / std::pow(base, double(2 * i) / double(rope));
    const nlohmann::json* yarn = yarn_scaling();
    if (yarn) inv = yarn_inv_freq(rope, base, *yarn);
    const double m = rope_attention_factor();
    for (size_t hh = 0; hh < nh; ++hh) mla_rope(&q[hh * qk + nope], rope, inv, p, interleave, m);
    mla_rope(k_rope.data(), rope, inv, p, interleave, m);
    // DeepSeek's YaRN also scales the attention logits by mscale(factor, mscale_all_dim)^2.
    double scale = 1.0 / std::sqrt(double(qk));
    if (yarn && yarn->value("mscale_all_dim", 0.0) != 0) {
      const double ms = yarn_mscale((*yarn)["factor"], (*yarn)["mscale_all_dim"]);
      scale *= ms * ms;
    }
    // Keys and values of every head, as HF expands them: k_h = [k_nope_h | k_rope].
    std::vector<double> keys(nh * qk), values(nh * vd);
    for (size_t hh = 0; hh < nh; ++hh) {
      std::copy(kv.begin() + long(hh * (nope + vd)), kv.begin() + long(hh * (nope + vd) + nope),
                keys.begin() + long(hh * qk));
      std::copy(k_rope.begin(), k_rope.end(), keys.begin() + long(hh * qk + nope));
      std::copy(kv.begin() + long(hh * (nope + vd) + nope), kv.begin() + long((hh + 1) * (nope + vd)),
                values.begin() + long(hh * vd));
    }
    cache.k.push_back(keys);
    cache.v.push_back(values);
    std::vector<double> att(nh * vd, 0.0);
    for (size_t hh = 0; hh < nh; ++hh) attend(&q[hh * qk], cache, hh * qk, hh * vd, qk, vd, 0, scale, &att[hh * vd]);
    return linear(L + "self_attn.o_proj", att);
  }

  // DeepSeek's rope part: interleaved (rope_interleave) rotates pairs (2i, 2i+1) and writes
  // [rotated evens | rotated odds] (apply_rotary_pos_emb_interleave); otherwise rotate_half.
  static void mla_rope(double* x, size_t rope, const std::vector<double>& inv, size_t pos, bool interleave, double m) {
    std::vector<double> out(rope);
    for (size_t i = 0; i < rope / 2; ++i) {
      const double a = double(pos) * inv[i], cs = m * std::cos(a), sn = m * std::sin(a);
      const double u = interleave ? x[2 * i] : x[i], w = interleave ? x[2 * i + 1] : x[i + rope / 2];
      out[i] = u * cs - w * sn;
      out[i + rope / 2] = w * cs + u * sn;
    }
    std::copy(out.begin(), out.end(), x);
  }

  // down(act(gate x) * up x) of `prefix` (gate_proj/up_proj/down_proj or a fused gate_up_proj,
  // or Mixtral's w1/w3/w2).
  std::vector<double> mlp(const std::string& prefix, const std::vector<double>& x) const {
    std::vector<double> gate, up;
    if (tensors_.count(prefix + "gate_up_proj.weight")) {
      const auto gu = linear(prefix + "gate_up_proj", x);
      gate.assign(gu.begin(), gu.begin() + long(gu.size() / 2));
      up.assign(gu.begin() + long(gu.size() / 2), gu.end());
    } else if (tensors_.count(prefix + "w1.weight")) {
      gate = linear(prefix + "w1", x);
      up = linear(prefix + "w3", x);
    } else {
      gate = linear(prefix + "gate_proj", x);
      up = linear(prefix + "up_proj", x);
    }
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
    return linear(prefix + (tensors_.count(prefix + "w2.weight") ? "w2" : "down_proj"), gate);
  }

  // Expert e of transformers 5's stacked layout: gate_up_proj [n][2 ff][d] ([gate; up] rows),
  // down_proj [n][d][ff].
  std::vector<double> stacked_expert(const std::string& L, size_t e, const std::vector<double>& x) const {
    const auto& gu = t(L + "mlp.experts.gate_up_proj");
    const auto& down = t(L + "mlp.experts.down_proj");
    const size_t d = x.size(), n = t(L + "mlp.gate.weight").size() / d, ff = gu.size() / n / d / 2;
    std::vector<double> h(ff);
    for (size_t r = 0; r < ff; ++r) {
      double g = 0, u = 0;
      for (size_t c = 0; c < d; ++c) {
        g += gu[(e * 2 * ff + r) * d + c] * x[c];
        u += gu[(e * 2 * ff + ff + r) * d + c] * x[c];
      }
      h[r] = g / (1 + std::exp(-g)) * u;
    }
    std::vector<double> y(d, 0.0);
    for (size_t r = 0; r < d; ++r)
      for (size_t c = 0; c < ff; ++c) y[r] += down[(e * d + r) * ff + c] * h[c];
    return y;
  }

  // The k largest of `score` (ties: lowest index), as torch.topk.
  static std::vector<size_t> top_k(const std::vector<double>& score, size_t k) {
    std::vector<size_t> idx(score.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
    idx.resize(k);
    return idx;
  }

  // The routers of the HF modelling code: which experts, with which weights.
  void route(const std::string& L, const std::vector<double>& x, std::vector<size_t>& chosen,
             std::vector<double>& weight) const {
    const auto& c = config_;
    const std::string a = arch();
    const size_t k = c["num_experts_per_tok"];
    const bool mixtral = a == "MixtralForCausalLM";
    const auto logits = linear(L + (mixtral ? "block_sparse_moe.gate" : "mlp.gate"), x);
    const size_t n = logits.size();
    std::vector<double> p(n);
    const bool sigmoid = a == "Glm4MoeForCausalLM" || a == "DeepseekV3ForCausalLM" || a == "Glm4MoeLiteForCausalLM";
    if (sigmoid) {
      for (size_t e = 0; e < n; ++e) p[e] = 1.0 / (1.0 + std::exp(-logits[e]));
    } else {  // softmax over all experts
      const double mx = *std::max_element(logits.begin(), logits.end());
      double sum = 0;
      for (size_t e = 0; e < n; ++e) sum += p[e] = std::exp(logits[e] - mx);
      for (double& v : p) v /= sum;
    }
    std::vector<double> choice = p;
    if (tensors_.count(L + "mlp.gate.e_score_correction_bias"))
      for (size_t e = 0; e < n; ++e) choice[e] += t(L + "mlp.gate.e_score_correction_bias")[e];
    const size_t groups = c.value("n_group", size_t(1)), used_groups = c.value("topk_group", groups);
    const bool v2 = a == "DeepseekV2ForCausalLM";
    if (groups > 1 && (!v2 || c.value("topk_method", std::string("greedy")) == "group_limited_greedy"))
      restrict_to_groups(choice, groups, used_groups, v2);
    chosen = top_k(choice, k);
    weight.clear();
    double sum = 0;
    for (size_t e : chosen) sum += p[e], weight.push_back(p[e]);
    // Mixtral always renormalizes; DeepSeek-V2 (transformers) never does; the others say.
    const bool norm = mixtral || (a != "DeepseekV2ForCausalLM" && c.value("norm_topk_prob", false));
    for (double& w : weight)
      w = (norm ? w / (sum + (sigmoid ? 1e-20 : 0.0)) : w) * c.value("routed_scaling_factor", 1.0);
  }

  // Grouped top-k: only the topk_group best groups of consecutive experts stay eligible; a
  // group scores its top-2 sum (DeepSeek-V3 noaux_tc), or its max (V2 group_limited_greedy).
  static void restrict_to_groups(std::vector<double>& choice, size_t groups, size_t used, bool by_max) {
    const size_t per = choice.size() / groups;
    std::vector<double> score(groups);
    for (size_t g = 0; g < groups; ++g) {
      const std::vector<double> members(choice.begin() + long(g * per), choice.begin() + long((g + 1) * per));
      const auto best = top_k(members, by_max ? 1 : 2);
      for (size_t i : best) score[g] += members[i];
    }
    const auto keep = top_k(score, used);
    for (size_t g = 0; g < groups; ++g)
      if (std::find(keep.begin(), keep.end(), g) == keep.end())
        for (size_t e = g * per; e < (g + 1) * per; ++e) choice[e] = by_max ? 0.0 : -INFINITY;
  }

  // Routed experts, weighted, plus the shared expert(s) (Qwen2-MoE's behind a sigmoid gate).
  std::vector<double> moe(const std::string& L, const std::vector<double>& x) const {
    if (arch() == "GptOssForCausalLM") return gpt_oss_moe(L, x);
    std::vector<size_t> chosen;
    std::vector<double> weight;
    route(L, x, chosen, weight);
    const std::string experts = arch() == "MixtralForCausalLM" ? "block_sparse_moe.experts." : "mlp.experts.";
    std::vector<double> y(x.size(), 0.0);
    for (size_t i = 0; i < chosen.size(); ++i) {
      const auto out = tensors_.count(L + "mlp.experts.gate_up_proj")
                           ? stacked_expert(L, chosen[i], x)
                           : mlp(L + experts + std::to_string(chosen[i]) + ".", x);
      for (size_t j = 0; j < y.size(); ++j) y[j] += weight[i] * out[j];
    }
    for (const char* shared : {"mlp.shared_experts.", "mlp.shared_expert."}) {
      if (!tensors_.count(L + shared + "down_proj.weight")) continue;
      auto out = mlp(L + shared, x);
      if (tensors_.count(L + "mlp.shared_expert_gate.weight")) {
        const double g = 1.0 / (1.0 + std::exp(-linear(L + "mlp.shared_expert_gate", x)[0]));
        for (double& v : out) v *= g;
      }
      for (size_t j = 0; j < y.size(); ++j) y[j] += out[j];
    }
    return y;
  }

  // ---- gpt-oss (modeling_gpt_oss and transformers' MXFP4 dequantization). ----

  // openai's MXFP4: 32 e2m1 values per block, byte i holding element 2i (low nibble) and 2i + 1
  // (high), times 2^(scale - 127). [n][rows][nb][16] blocks -> [n][rows][nb * 32] values.
  static std::vector<double> dequantize_mxfp4(const std::vector<uint8_t>& blocks, const std::vector<uint8_t>& scales) {
    static const double kFp4[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
    std::vector<double> out;
    out.reserve(scales.size() * 32);
    for (size_t b = 0; b < scales.size(); ++b)
      for (size_t i = 0; i < 32; ++i) {
        const uint8_t byte = blocks[b * 16 + i / 2];
        out.push_back(kFp4[i % 2 == 0 ? byte & 0x0F : byte >> 4] * std::ldexp(1.0, int(scales[b]) - 127));
      }
    return out;
  }

  // Every layer's experts as "...gate_up_proj.weight" [n][2 ff][d] and "...down_proj.weight"
  // [n][d][ff] (out x in, HF's MXFP4 layout), from MXFP4 or from dense [n][in][out] tensors.
  void dequantize_gpt_oss_experts() {
    for (size_t il = 0; il < size_t(config_["num_hidden_layers"]); ++il) {
      const std::string E = "model.layers." + std::to_string(il) + ".mlp.experts.";
      for (const char* proj : {"gate_up_proj", "down_proj"}) {
        const std::string P = E + proj;
        if (raw_.count(P + "_blocks")) {
          tensors_[P + ".weight"] = dequantize_mxfp4(raw_.at(P + "_blocks"), raw_.at(P + "_scales"));
        } else {  // dense [n][in][out]: transpose each expert
          const auto& w = t(P);
          const size_t n = config_["num_local_experts"], d = config_["hidden_size"];
          const size_t in = std::string(proj) == "down_proj" ? w.size() / n / d : d, out = w.size() / n / in;
          std::vector<double> tr(w.size());
          for (size_t e = 0; e < n; ++e)
            for (size_t i = 0; i < in; ++i)
              for (size_t o = 0; o < out; ++o) tr[(e * out + o) * in + i] = w[(e * in + i) * out + o];
          tensors_[P + ".weight"] = tr;
        }
      }
    }
  }

  // x as the 8-bit blocks (Q8_0: round(x / d), d = fp16(amax / 127) per 32) that llama.cpp, and
  // the engine, multiply MXFP4 weights with: the MXFP4 comparison then isolates the mapping.
  static std::vector<double> q8_0_activations(const std::vector<double>& x) {
    std::vector<double> y(x.size());
    for (size_t b = 0; b + 32 <= x.size(); b += 32) {
      float amax = 0;
      for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(float(x[i])));
      const float d = amax / 127, id = d != 0 ? 1 / d : 0, d16 = fp16_to_float(float_to_fp16(d));
      for (size_t i = b; i < b + 32; ++i) y[i] = double(std::round(float(x[i]) * id)) * d16;
    }
    return y;
  }

  // Expert e's rows of a stacked [n][rows][cols] weight times x, plus its bias row.
  std::vector<double> expert_linear(const std::string& P, size_t e, const std::vector<double>& x_in) const {
    const std::vector<double> x = raw_.count(P + "_blocks") && q8_mxfp4_ ? q8_0_activations(x_in) : x_in;
    const auto& w = t(P + ".weight");
    const auto& b = t(P + "_bias");
    const size_t n = config_["num_local_experts"], rows = b.size() / n, cols = x.size();
    std::vector<double> y(rows);
    for (size_t r = 0; r < rows; ++r) {
      double s = b[e * rows + r];
      for (size_t c = 0; c < cols; ++c) s += w[(e * rows + r) * cols + c] * x[c];
      y[r] = s;
    }
    return y;
  }

  // Router: top-k of the logits (+ bias), softmax over the chosen; experts: interleaved gate/up,
  // clamped at swiglu_limit, gate * sigmoid(1.702 gate) * (up + 1).
  std::vector<double> gpt_oss_moe(const std::string& L, const std::vector<double>& x) const {
    const size_t k = config_.value("num_experts_per_tok", config_.value("experts_per_token", size_t(4)));
    const double limit = config_.value("swiglu_limit", 7.0), alpha = 1.702;
    const auto logits = linear(L + "mlp.router", x);
    const auto chosen = top_k(logits, k);
    double mx = -1e300, sum = 0;
    for (size_t e : chosen) mx = std::max(mx, logits[e]);
    for (size_t e : chosen) sum += std::exp(logits[e] - mx);
    std::vector<double> y(x.size(), 0.0);
    for (size_t e : chosen) {
      const auto gu = expert_linear(L + "mlp.experts.gate_up_proj", e, x);
      std::vector<double> h(gu.size() / 2);
      for (size_t i = 0; i < h.size(); ++i) {
        const double g = std::min(gu[2 * i], limit), u = std::clamp(gu[2 * i + 1], -limit, limit);
        h[i] = g / (1 + std::exp(-alpha * g)) * (u + 1);
      }
      const auto out = expert_linear(L + "mlp.experts.down_proj", e, h);
      const double w = std::exp(logits[e] - mx) / sum;
      for (size_t j = 0; j < y.size(); ++j) y[j] += w * out[j];
    }
    return y;
  }

  // transformers' YaRN (_compute_yarn_parameters): extrapolated high frequencies, interpolated
  // low ones, a linear ramp between the beta_fast and beta_slow correction dims (rounded out
  // unless truncate: false).
  std::vector<double> yarn_inv_freq(size_t rot, double base, const nlohmann::json& rs) const {
    const double factor = rs["factor"], beta_fast = rs.value("beta_fast", 32.0), beta_slow = rs.value("beta_slow", 1.0);
    const double orig = rs.value("original_max_position_embeddings", config_["max_position_embeddings"].get<double>());
    auto corr = [&](double rotations) {
      return double(rot) * std::log(orig / (rotations * 2 * M_PI)) / (2 * std::log(base));
    };
    double low = corr(beta_fast), high = corr(beta_slow);
    if (rs.value("truncate", true)) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0), high = std::min(high, double(rot - 1));
    if (low == high) high += 0.001;
    std::vector<double> inv(rot / 2);
    for (size_t i = 0; i < inv.size(); ++i) {
      const double extrapolation = 1.0 / std::pow(base, double(2 * i) / double(rot));
      const double keep = 1.0 - std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
      inv[i] = extrapolation / factor * (1 - keep) + extrapolation * keep;
    }
    return inv;
  }

  // config.json's rope_scaling when it is YaRN, else null.
  const nlohmann::json* yarn_scaling() const {
    if (!config_.contains("rope_scaling") || !config_["rope_scaling"].is_object()) return nullptr;
    const auto& rs = config_["rope_scaling"];
    return rs.value("rope_type", rs.value("type", std::string())) == "yarn" ? &rs : nullptr;
  }

  static double yarn_mscale(double factor, double mscale) {
    return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
  }

  // YaRN's attention factor on cos and sin: attention_factor if given, else DeepSeek's
  // mscale(mscale) / mscale(mscale_all_dim) where both are given, else mscale(1); 1 without YaRN.
  double rope_attention_factor() const {
    const nlohmann::json* rs = yarn_scaling();
    if (!rs) return 1.0;
    if (rs->contains("attention_factor")) return (*rs)["attention_factor"];
    const double factor = (*rs)["factor"], mscale = rs->value("mscale", 0.0), all = rs->value("mscale_all_dim", 0.0);
    if (mscale != 0 && all != 0) return yarn_mscale(factor, mscale) / yarn_mscale(factor, all);
    return yarn_mscale(factor, 1.0);
  }

  static std::vector<double> to_double(const SafetensorsTensor& t) {
    std::vector<double> v(size_t(t.n_elements()));
    for (size_t i = 0; i < v.size(); ++i) {
      if (t.dtype == "F32") {
        float f;
        std::memcpy(&f, t.data + 4 * i, 4);
        v[i] = f;
      } else {  // BF16: the high half of a float
        uint32_t bits = uint32_t(t.data[2 * i]) << 16 | uint32_t(t.data[2 * i + 1]) << 24;
        float f;
        std::memcpy(&f, &bits, 4);
        v[i] = f;
      }
    }
    return v;
  }

  const std::vector<double>& t(const std::string& name) const {
    static const std::vector<double> none;
    auto it = tensors_.find(name);
    EXPECT_NE(it, tensors_.end()) << name;
    return it == tensors_.end() ? none : it->second;
  }

  // y = W x (+ b): W is [out, in] row-major.
  std::vector<double> linear(const std::string& name, const std::vector<double>& x) const {
    const auto& w = t(name + ".weight");
    const size_t out = w.size() / x.size();
    std::vector<double> y(out, 0.0);
    for (size_t r = 0; r < out; ++r)
      for (size_t c = 0; c < x.size(); ++c) y[r] += w[r * x.size() + c] * x[c];
    if (tensors_.count(name + ".bias"))
      for (size_t r = 0; r < out; ++r) y[r] += t(name + ".bias")[r];
    return y;
  }

  // Per-pair inverse frequencies over the rotary dims, after rope_scaling.
  std::vector<double> rope_inv_freq(size_t hd) const {
    const auto& c = config_;
    const bool half = glm4() || arch() == "Glm4MoeForCausalLM";
    const double fraction = c.value("partial_rotary_factor", half ? 0.5 : 1.0);
    const size_t rot = size_t(double(hd) * fraction);
    double base = c.value("rope_theta", 10000.0);
    double linear = 1.0;
    if (c.contains("rope_scaling") && c["rope_scaling"].is_object()) {
      const auto& rs = c["rope_scaling"];
      const std::string type = rs.value("rope_type", rs.value("type", std::string()));
      const double factor = rs.value("factor", 1.0);
      if (type == "linear") linear = factor;
      if (type == "yarn") return yarn_inv_freq(rot, base, rs);
      if (type == "dynamic") {  // transformers' formula at seq_len = factor * max_position_embeddings
        const double max_pos = c["max_position_embeddings"], seq_len = factor * max_pos;
        base *= std::pow(factor * seq_len / max_pos - (factor - 1), double(rot) / double(rot - 2));
      }
    }
    std::vector<double> inv(rot / 2);
    for (size_t i = 0; i < inv.size(); ++i) inv[i] = 1.0 / std::pow(base, double(2 * i) / double(rot)) / linear;
    return inv;
  }

  // Optional per-head RMSNorm (Qwen3), then RoPE on the first `rot` dims of one head.
  void head_rope(std::vector<double>& v, size_t off, const std::string& norm, size_t hd, size_t rot,
                 const std::vector<double>& inv_freq, size_t pos, bool interleaved, double eps) const {
    if (tensors_.count(norm)) {
      const std::vector<double> head(v.begin() + long(off), v.begin() + long(off + hd));
      const auto normed = rmsnorm(head, t(norm), eps);
      std::copy(normed.begin(), normed.end(), v.begin() + long(off));
    }
    const double m = rope_attention_factor();
    for (size_t i = 0; i < rot / 2; ++i) {
      const double a = rope_position(pos, i) * inv_freq[i], cs = m * std::cos(a), sn = m * std::sin(a);
      const size_t x0 = off + (interleaved ? 2 * i : i), x1 = off + (interleaved ? 2 * i + 1 : i + rot / 2);
      const double u = v[x0], w = v[x1];
      v[x0] = u * cs - w * sn;
      v[x1] = w * cs + u * sn;
    }
  }

  nlohmann::json config_;
  std::vector<const double*> embeds_;
  std::vector<std::array<double, 3>> mrope_;
  std::map<std::string, std::vector<double>> tensors_;
  std::map<std::string, std::vector<uint8_t>> raw_;  // U8 tensors (MXFP4 blocks and scales)
  bool q8_mxfp4_ = false;
};

}  // namespace autoglm::test
