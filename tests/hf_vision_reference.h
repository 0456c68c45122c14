// A float64 vision tower written from the Hugging Face modelling code of GLM-4.1V
// (Glm4vVisionModel) and Qwen2.5-VL (Qwen2_5_VisionTransformerPretrainedModel), on HF tensor
// names and config.json's vision_config: the Conv3d patch embedding over the processor's
// columns, GLM's RMSNorm and learned positions through grid_sample (bicubic, align_corners
// False, border padding), the rotate_half 2-D rotary, Qwen's get_window_index as written there
// (the grid padded with -100 to whole windows, then the pads dropped) with cu_window_seqlens,
// the blocks, and each merger; plus get_rope_index for a prompt with images. It shares nothing
// with the engine's projector mapping, so the two check each other.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "formats/safetensors.h"
#include "hf_reference.h"
#include "test_util.h"

namespace autoglm::test {

class HfVisionReference {
 public:
  explicit HfVisionReference(const std::string& dir) {
    const auto config = nlohmann::json::parse(read_file(dir + "/config.json"));
    v_ = config["vision_config"];
    glm_ = config["architectures"][0] == "Glm4vForConditionalGeneration";
    auto ck = SafetensorsCheckpoint::open_folder(dir);
    EXPECT_TRUE(ck.is_ok()) << ck.status().message();
    for (const auto& f : (*ck)->files())
      for (const auto& t : f->tensors()) {
        for (const char* prefix : {"model.visual.", "visual."})
          if (t.name.rfind(prefix, 0) == 0) tensors_[t.name.substr(std::string(prefix).size())] = to_double(t);
      }
  }

  // pixel_values of one image (rows x 1176, merge-block row order) on a gh x gw patch grid:
  // its (gh / 2) x (gw / 2) tokens, raster order, out_hidden_size each.
  std::vector<double> embed(const std::vector<float>& pixels, size_t gh, size_t gw) const {
    const size_t n = gh * gw, c = v_["hidden_size"], heads = v_["num_heads"], cols = pixels.size() / n;
    std::vector<std::vector<double>> x(n);
    const auto& w = t("patch_embed.proj.weight");
    for (size_t r = 0; r < n; ++r) {
      x[r].assign(c, 0.0);
      for (size_t o = 0; o < c; ++o) {
        double s = glm_ ? t("patch_embed.proj.bias")[o] : 0.0;
        for (size_t i = 0; i < cols; ++i) s += w[o * cols + i] * double(pixels[r * cols + i]);
        x[r][o] = s;
      }
    }
    // rot_pos_emb: patch row and column of every row (merge-block order).
    std::vector<std::array<size_t, 2>> pos(n);
    for (size_t r = 0; r < n; ++r) {
      const size_t block = r / 4, bw = gw / 2;
      pos[r] = {block / bw * 2 + (r / 2) % 2, block % bw * 2 + r % 2};
    }
    if (glm_) {
      for (auto& row : x) row = rmsnorm(row, t("post_conv_layernorm.weight"), eps());
      for (size_t r = 0; r < n; ++r) {
        const auto p = learned_position(pos[r][0], pos[r][1], gh, gw);
        for (size_t i = 0; i < c; ++i) x[r][i] += p[i];
      }
    }
    std::vector<size_t> window_index;  // Qwen: merge units in window order
    std::vector<size_t> cu_window = {0}, cu_full = {0, n};
    if (!glm_) {
      window_index = qwen_window_index(gh / 2, gw / 2, cu_window);
      std::vector<std::vector<double>> xs;
      std::vector<std::array<size_t, 2>> ps;
      for (size_t u : window_index)
        for (size_t k = 0; k < 4; ++k) xs.push_back(x[4 * u + k]), ps.push_back(pos[4 * u + k]);
      x.swap(xs);
      pos.swap(ps);
    }
    const size_t depth = v_["depth"];
    for (size_t il = 0; il < depth; ++il) {
      const std::string B = "blocks." + std::to_string(il) + ".";
      bool full = glm_;
      if (!glm_)
        for (const auto& f : v_["fullatt_block_indexes"]) full = full || f.get<size_t>() == il;
      std::vector<std::vector<double>> h(n);
      for (size_t r = 0; r < n; ++r) h[r] = rmsnorm(x[r], t(B + "norm1.weight"), eps());
      const auto a = attention(B, h, pos, full ? cu_full : cu_window, heads);
      for (size_t r = 0; r < n; ++r) {
        for (size_t i = 0; i < c; ++i) x[r][i] += a[r][i];
        const auto m = mlp(B + "mlp.", rmsnorm(x[r], t(B + "norm2.weight"), eps()));
        for (size_t i = 0; i < c; ++i) x[r][i] += m[i];
      }
    }
    return glm_ ? glm_merger(x) : qwen_merger(x, window_index);
  }

  // get_rope_index for one sequence: image runs of `image_token` with grids (rows, cols) in
  // merged units, in order; text elsewhere. Positions (t, h, w) of every token.
  static std::vector<std::array<double, 3>> rope_index(const std::vector<int32_t>& tokens, int32_t image_token,
                                                       const std::vector<std::array<size_t, 2>>& grids) {
    std::vector<std::array<double, 3>> out;
    double next = 0;
    size_t image = 0;
    for (size_t i = 0; i < tokens.size();) {
      if (tokens[i] != image_token) {
        out.push_back({next, next, next});
        next += 1, ++i;
        continue;
      }
      const size_t rows = grids[image][0], cols = grids[image][1];
      ++image;
      for (size_t r = 0; r < rows; ++r)
        for (size_t q = 0; q < cols; ++q) out.push_back({next, next + double(r), next + double(q)});
      i += rows * cols;
      next += double(std::max(rows, cols));
    }
    return out;
  }

 private:
  double eps() const { return v_.value("rms_norm_eps", glm_ ? 1e-5 : 1e-6); }
  const std::vector<double>& t(const std::string& name) const {
    auto it = tensors_.find(name);
    EXPECT_TRUE(it != tensors_.end()) << "no vision tensor " << name;
    static const std::vector<double> none;
    return it == tensors_.end() ? none : it->second;
  }
  bool has(const std::string& name) const { return tensors_.count(name) > 0; }

  static std::vector<double> to_double(const SafetensorsTensor& s) {
    std::vector<double> out(size_t(s.n_elements()));
    const float* f = reinterpret_cast<const float*>(s.data);  // the tests write F32
    for (size_t i = 0; i < out.size(); ++i) out[i] = f[i];
    return out;
  }

  std::vector<double> linear(const std::string& name, const std::vector<double>& x) const {
    const auto& w = t(name + ".weight");
    const size_t in = x.size(), out = w.size() / in;
    std::vector<double> y(out, 0.0);
    for (size_t o = 0; o < out; ++o) {
      double s = has(name + ".bias") ? t(name + ".bias")[o] : 0.0;
      for (size_t i = 0; i < in; ++i) s += w[o * in + i] * x[i];
      y[o] = s;
    }
    return y;
  }

  static std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w, double eps) {
    return HfReference::rmsnorm(x, w, eps);
  }

  std::vector<double> mlp(const std::string& p, const std::vector<double>& x) const {
    auto g = linear(p + "gate_proj", x);
    const auto u = linear(p + "up_proj", x);
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
    return linear(p + "down_proj", g);
  }

  // grid_sample(table as [1, C, G, G], bicubic, align_corners=False, padding_mode="border") at
  // the patch's normalised centre: x from the column, y from the row.
  std::vector<double> learned_position(size_t row, size_t col, size_t gh, size_t gw) const {
    const auto& table = t("embeddings.position_embedding.weight");
    const size_t c = v_["hidden_size"], g = size_t(std::lround(std::sqrt(double(table.size() / c))));
    const double gx = (double(col) + 0.5) / double(gw) * 2 - 1, gy = (double(row) + 0.5) / double(gh) * 2 - 1;
    const double ix = ((gx + 1) * double(g) - 1) / 2, iy = ((gy + 1) * double(g) - 1) / 2;
    const double x0 = std::floor(ix), y0 = std::floor(iy);
    const auto cubic = [](double d) {  // A = -0.75
      const double a = -0.75;
      d = std::fabs(d);
      return d <= 1 ? ((a + 2) * d - (a + 3)) * d * d + 1 : d < 2 ? ((a * d - 5 * a) * d + 8 * a) * d - 4 * a : 0.0;
    };
    std::vector<double> out(c, 0.0);
    for (int dy = -1; dy <= 2; ++dy)
      for (int dx = -1; dx <= 2; ++dx) {
        const double wgt = cubic(iy - (y0 + dy)) * cubic(ix - (x0 + dx));
        const long yy = std::clamp(long(y0) + dy, 0L, long(g) - 1), xx = std::clamp(long(x0) + dx, 0L, long(g) - 1);
        for (size_t i = 0; i < c; ++i) out[i] += wgt * table[(size_t(yy) * g + size_t(xx)) * c + i];
      }
    return out;
  }

  // get_window_index for one image of llm_h x llm_w merged units: the grid padded with -100
  // to whole windows (a whole extra window when it divides, as the code does), windows read
  // in raster order, the pads dropped; cu gets the cumulative patch counts, repeats removed.
  std::vector<size_t> qwen_window_index(size_t llm_h, size_t llm_w, std::vector<size_t>& cu) const {
    const size_t ws = size_t(v_.value("window_size", 112)) / 2 / size_t(v_.value("patch_size", 14));
    const size_t ph = llm_h + ws - llm_h % ws, pw = llm_w + ws - llm_w % ws;
    std::vector<long> grid(ph * pw, -100);
    for (size_t r = 0; r < llm_h; ++r)
      for (size_t q = 0; q < llm_w; ++q) grid[r * pw + q] = long(r * llm_w + q);
    std::vector<size_t> index;
    for (size_t wr = 0; wr < ph / ws; ++wr)
      for (size_t wc = 0; wc < pw / ws; ++wc) {
        size_t count = 0;
        for (size_t r = 0; r < ws; ++r)
          for (size_t q = 0; q < ws; ++q)
            if (const long u = grid[(wr * ws + r) * pw + wc * ws + q]; u != -100) index.push_back(size_t(u)), ++count;
        const size_t end = cu.back() + 4 * count;
        if (end != cu.back()) cu.push_back(end);  // unique_consecutive
      }
    return index;
  }

  // Qwen2_5_VLVisionAttention / Glm4vVisionAttention: qkv, rotate_half 2-D rotary, softmax
  // within each [cu[i], cu[i+1]), proj.
  std::vector<std::vector<double>> attention(const std::string& B, const std::vector<std::vector<double>>& h,
                                             const std::vector<std::array<size_t, 2>>& pos,
                                             const std::vector<size_t>& cu, size_t heads) const {
    const size_t n = h.size(), c = h[0].size(), hd = c / heads, quarter = hd / 4;
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (size_t r = 0; r < n; ++r) {
      const auto qkv = linear(B + "attn.qkv", h[r]);
      q[r].assign(qkv.begin(), qkv.begin() + long(c));
      k[r].assign(qkv.begin() + long(c), qkv.begin() + long(2 * c));
      v[r].assign(qkv.begin() + long(2 * c), qkv.end());
      for (auto* x : {&q[r], &k[r]})
        for (size_t hh = 0; hh < heads; ++hh) {
          // emb = cat(freqs, freqs), freqs = [row * inv (quarter), col * inv (quarter)].
          std::vector<double> head(x->begin() + long(hh * hd), x->begin() + long((hh + 1) * hd)), out(hd);
          for (size_t i = 0; i < hd; ++i) {
            const size_t f = i % (hd / 2);
            const double inv = 1.0 / std::pow(10000.0, double(2 * (f % quarter)) / double(hd / 2));
            const double angle = double(f < quarter ? pos[r][0] : pos[r][1]) * inv;
            const double rotated = i < hd / 2 ? -head[i + hd / 2] : head[i - hd / 2];
            out[i] = head[i] * std::cos(angle) + rotated * std::sin(angle);
          }
          std::copy(out.begin(), out.end(), x->begin() + long(hh * hd));
        }
    }
    std::vector<std::vector<double>> o(n, std::vector<double>(c, 0.0));
    for (size_t s = 0; s + 1 < cu.size(); ++s)
      for (size_t i = cu[s]; i < cu[s + 1]; ++i)
        for (size_t hh = 0; hh < heads; ++hh) {
          std::vector<double> sc;
          double mx = -1e300, sum = 0;
          for (size_t j = cu[s]; j < cu[s + 1]; ++j) {
            double dot = 0;
            for (size_t e = 0; e < hd; ++e) dot += q[i][hh * hd + e] * k[j][hh * hd + e];
            sc.push_back(dot / std::sqrt(double(hd)));
            mx = std::max(mx, sc.back());
          }
          for (double& x : sc) sum += x = std::exp(x - mx);
          for (size_t j = cu[s]; j < cu[s + 1]; ++j)
            for (size_t e = 0; e < hd; ++e) o[i][hh * hd + e] += sc[j - cu[s]] / sum * v[j][hh * hd + e];
        }
    for (auto& row : o) row = linear(B + "attn.proj", row);
    return o;
  }

  static double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

  // post_layernorm, downsample (Conv2d k=2 s=2 over each block's 4 tokens at (k/2, k%2)),
  // merger: proj, LayerNorm, GELU, gated FFN.
  std::vector<double> glm_merger(std::vector<std::vector<double>>& x) const {
    const size_t c = x[0].size();
    for (auto& row : x) row = rmsnorm(row, t("post_layernorm.weight"), eps());
    const auto& conv = t("downsample.weight");
    const size_t out_c = t("downsample.bias").size();
    std::vector<double> all;
    for (size_t u = 0; u < x.size() / 4; ++u) {
      std::vector<double> m(out_c);
      for (size_t o = 0; o < out_c; ++o) {
        double s = t("downsample.bias")[o];
        for (size_t ch = 0; ch < c; ++ch)
          for (size_t kk = 0; kk < 4; ++kk) s += conv[((o * c + ch) * 2 + kk / 2) * 2 + kk % 2] * x[4 * u + kk][ch];
        m[o] = s;
      }
      auto p = linear("merger.proj", m);
      double mean = 0, var = 0;
      for (double v : p) mean += v;
      mean /= double(p.size());
      for (double v : p) var += (v - mean) * (v - mean);
      var /= double(p.size());
      for (size_t i = 0; i < p.size(); ++i)
        p[i] = gelu((p[i] - mean) / std::sqrt(var + 1e-5) * t("merger.post_projection_norm.weight")[i] +
                    t("merger.post_projection_norm.bias")[i]);
      const auto y = mlp("merger.", p);
      all.insert(all.end(), y.begin(), y.end());
    }
    return all;
  }

  // ln_q per token, the unit's 4 tokens concatenated, mlp.0, GELU, mlp.2; back to raster order.
  std::vector<double> qwen_merger(std::vector<std::vector<double>>& x, const std::vector<size_t>& index) const {
    for (auto& row : x) row = rmsnorm(row, t("merger.ln_q.weight"), 1e-6);
    const size_t units = x.size() / 4;
    std::vector<std::vector<double>> y(units);
    for (size_t u = 0; u < units; ++u) {
      std::vector<double> cat;
      for (size_t k = 0; k < 4; ++k) cat.insert(cat.end(), x[4 * u + k].begin(), x[4 * u + k].end());
      auto hdn = linear("merger.mlp.0", cat);
      for (double& v : hdn) v = gelu(v);
      y[index[u]] = linear("merger.mlp.2", hdn);
    }
    std::vector<double> all;
    for (const auto& row : y) all.insert(all.end(), row.begin(), row.end());
    return all;
  }

  nlohmann::json v_;
  bool glm_ = false;
  std::map<std::string, std::vector<double>> tensors_;
};

}  // namespace autoglm::test
