// A float64 forward pass written from the Hugging Face modelling code of the supported
// architectures (Llama, Mistral with its sliding window, Qwen2, Qwen3, GLM-4-0414): HF
// tensor names, HF RoPE conventions (rotate_half, or GLM's interleaved pairs on the first
// partial_rotary_factor of each head), HF rope_scaling. It shares nothing with the
// engine's mapping onto GGUF, so the two checking each other tests that mapping too.
#pragma once

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
    auto ck = SafetensorsCheckpoint::open_folder(dir);
    EXPECT_TRUE(ck.is_ok()) << ck.status().message();
    for (const auto& f : (*ck)->files())
      for (const auto& t : f->tensors()) tensors_[t.name] = to_double(t);
  }

  // Logits of every position, [tokens.size()][vocab]; `hidden` (optional) gets the final
  // normed hidden state of every position, [tokens.size()][hidden_size].
  std::vector<double> forward(const std::vector<int32_t>& tokens, std::vector<double>* hidden = nullptr) const {
    const auto& c = config_;
    const std::string arch = c["architectures"][0];
    const bool glm4 = arch == "Glm4ForCausalLM";
    const size_t d = c["hidden_size"], nh = c["num_attention_heads"];
    const size_t nkv = c.value("num_key_value_heads", nh), hd = c.value("head_dim", d / nh);
    const size_t n_layer = c["num_hidden_layers"], vocab = c["vocab_size"];
    const double eps = c.value("rms_norm_eps", 1e-6);
    const size_t window =
        c.contains("sliding_window") && c["sliding_window"].is_number() ? size_t(c["sliding_window"]) : 0;
    const auto inv_freq = rope_inv_freq(hd);
    const size_t rot = 2 * inv_freq.size();
    const auto& embed = t("model.embed_tokens.weight");
    const auto& head = tensors_.count("lm_head.weight") ? t("lm_head.weight") : embed;

    std::vector<std::vector<std::vector<double>>> K(n_layer), V(n_layer);
    std::vector<double> logits;
    for (size_t p = 0; p < tokens.size(); ++p) {
      std::vector<double> x(embed.begin() + long(size_t(tokens[p]) * d),
                            embed.begin() + long((size_t(tokens[p]) + 1) * d));
      for (size_t il = 0; il < n_layer; ++il) {
        const std::string L = "model.layers." + std::to_string(il) + ".";
        auto h = rmsnorm(x, t(L + "input_layernorm.weight"), eps);
        auto q = linear(L + "self_attn.q_proj", h), k = linear(L + "self_attn.k_proj", h),
             v = linear(L + "self_attn.v_proj", h);
        for (size_t hh = 0; hh < nh; ++hh)
          head_rope(q, hh * hd, L + "self_attn.q_norm.weight", hd, rot, inv_freq, p, glm4, eps);
        for (size_t hh = 0; hh < nkv; ++hh)
          head_rope(k, hh * hd, L + "self_attn.k_norm.weight", hd, rot, inv_freq, p, glm4, eps);
        K[il].push_back(k);
        V[il].push_back(v);
        std::vector<double> att(nh * hd, 0.0);
        for (size_t hh = 0; hh < nh; ++hh) {
          const size_t g = hh / (nh / nkv);
          const size_t first = window > 0 && p + 1 > window ? p + 1 - window : 0;
          std::vector<double> sc;
          double mx = -1e300, sum = 0;
          for (size_t j = first; j <= p; ++j) {
            double dot = 0;
            for (size_t e = 0; e < hd; ++e) dot += q[hh * hd + e] * K[il][j][g * hd + e];
            sc.push_back(dot / std::sqrt(double(hd)));
            mx = std::max(mx, sc.back());
          }
          for (double& s : sc) sum += s = std::exp(s - mx);
          for (size_t j = first; j <= p; ++j)
            for (size_t e = 0; e < hd; ++e) att[hh * hd + e] += sc[j - first] / sum * V[il][j][g * hd + e];
        }
        auto o = linear(L + "self_attn.o_proj", att);
        if (glm4) o = rmsnorm(o, t(L + "post_self_attn_layernorm.weight"), eps);
        for (size_t i = 0; i < d; ++i) x[i] += o[i];
        h = rmsnorm(x, t(L + "post_attention_layernorm.weight"), eps);
        std::vector<double> gate, up;
        if (tensors_.count(L + "mlp.gate_up_proj.weight")) {
          const auto gu = linear(L + "mlp.gate_up_proj", h);
          gate.assign(gu.begin(), gu.begin() + long(gu.size() / 2));
          up.assign(gu.begin() + long(gu.size() / 2), gu.end());
        } else {
          gate = linear(L + "mlp.gate_proj", h);
          up = linear(L + "mlp.up_proj", h);
        }
        for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
        auto m = linear(L + "mlp.down_proj", gate);
        if (glm4) m = rmsnorm(m, t(L + "post_mlp_layernorm.weight"), eps);
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

 private:
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

  static std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w, double eps) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double s = 1.0 / std::sqrt(ss / double(x.size()) + eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * w[i];
    return y;
  }

  // Per-pair inverse frequencies over the rotary dims, after rope_scaling.
  std::vector<double> rope_inv_freq(size_t hd) const {
    const auto& c = config_;
    const bool glm4 = c["architectures"][0] == "Glm4ForCausalLM";
    const double fraction = c.value("partial_rotary_factor", glm4 ? 0.5 : 1.0);
    const size_t rot = size_t(double(hd) * fraction);
    double base = c.value("rope_theta", 10000.0);
    double linear = 1.0;
    if (c.contains("rope_scaling") && c["rope_scaling"].is_object()) {
      const auto& rs = c["rope_scaling"];
      const std::string type = rs.value("rope_type", rs.value("type", std::string()));
      const double factor = rs["factor"];
      if (type == "linear") linear = factor;
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
    for (size_t i = 0; i < rot / 2; ++i) {
      const double a = double(pos) * inv_freq[i];
      const size_t x0 = off + (interleaved ? 2 * i : i), x1 = off + (interleaved ? 2 * i + 1 : i + rot / 2);
      const double u = v[x0], w = v[x1];
      v[x0] = u * std::cos(a) - w * std::sin(a);
      v[x1] = w * std::cos(a) + u * std::sin(a);
    }
  }

  nlohmann::json config_;
  std::map<std::string, std::vector<double>> tensors_;
};

}  // namespace autoglm::test
