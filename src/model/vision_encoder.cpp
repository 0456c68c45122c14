#include "model/vision_encoder.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "model/vision_attention.h"

namespace autoglm {

struct VisionEncoder::Pass {
  int64_t n = 0;                   // patches
  int32_t grid_h = 0, grid_w = 0;  // in patches
  std::vector<float> x, xn, q, k, v, attn, gate, up, ffn_out;
  std::vector<int32_t> row, col;  // each token's patch row and column (its rotary position)
  std::vector<double> rope_inv;   // the rotary's frequency per pair (rotary_table)
  std::vector<float> rope_pos;    // [n, head_dim / 2]: each token's position per pair
  // Qwen: merge units in window order (unit i of the pass is unit order[i] of the image) and
  // the windows' token bounds; GLM: the identity and one window.
  std::vector<int64_t> order, window_bounds;
  std::optional<VisionAttention> attend;  // its buffers kept from layer to layer
};

namespace {

// PyTorch's cubic convolution (A = -0.75), as grid_sample(bicubic) weighs its 4 taps.
void cubic_weights(double t, double w[4]) {
  const double a = -0.75;
  const auto near = [&](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
  const auto far = [&](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
  w[0] = far(t + 1), w[1] = near(t), w[2] = near(1 - t), w[3] = far(2 - t);
}

// Qwen2.5-VL's windows: square tiles of `side` merged units over the rows x cols grid, clipped at
// the edges, in raster order of tiles and of units within a tile.
void window_order(int64_t rows, int64_t cols, int64_t side, std::vector<int64_t>& order, std::vector<int64_t>& bounds) {
  bounds = {0};
  for (int64_t wr = 0; wr < rows; wr += side)
    for (int64_t wc = 0; wc < cols; wc += side) {
      for (int64_t r = wr; r < std::min(rows, wr + side); ++r)
        for (int64_t c = wc; c < std::min(cols, wc + side); ++c) order.push_back(r * cols + c);
      bounds.push_back(4 * int64_t(order.size()));
    }
}

void gelu_erf(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = float(0.5 * x[i] * (1.0 + std::erf(double(x[i]) / std::sqrt(2.0))));
}

void layer_norm(float* x, const Vec& w, const Vec& b, float eps, int64_t width, int64_t n) {
  for (int64_t r = 0; r < n; ++r) {
    float* row = x + r * width;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < width; ++i) mean += row[i];
    mean /= double(width);
    for (int64_t i = 0; i < width; ++i) var += (row[i] - mean) * (row[i] - mean);
    const double inv = 1.0 / std::sqrt(var / double(width) + eps);
    for (int64_t i = 0; i < width; ++i) row[i] = float((row[i] - mean) * inv) * w[size_t(i)] + b[size_t(i)];
  }
}

void rmsnorm_rows(const float* x, const Vec& w, float eps, int64_t width, int64_t n, float* y) {
  for (int64_t r = 0; r < n; ++r) cpu::rmsnorm(x + r * width, w.data(), eps, width, y + r * width);
}

}  // namespace

// Rows of activations per unit of work (between_units runs between them).
constexpr int64_t kUnitRows = 512;

void VisionEncoder::linear(const cpu::WeightMatrix& w, const Vec& bias, const float* x, int64_t n, float* y) {
  for (int64_t r0 = 0; r0 < n; r0 += kUnitRows) {
    const int64_t rows = std::min(kUnitRows, n - r0);
    cpu::matmul(pool_, w, x + r0 * w.cols, rows, y + r0 * w.rows);
    unit_done();
  }
  if (bias.empty()) return;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < w.rows; ++i) y[r * w.rows + i] += bias[size_t(i)];
}

// The patch embedding, and each token's patch row and column: rows come in 2x2 merge blocks,
// r = ((block_row * (grid_w / 2) + block_col) * 2 + dy) * 2 + dx.
void VisionEncoder::embed_patches(Pass& p, const PixelPatches& patches) {
  const VisionWeights& w = model_.weights();
  const int64_t d = model_.spec().n_embd;
  p.x.resize(size_t(p.n * d));
  linear(w.patch, w.patch_bias, patches.values.data(), p.n, p.x.data());
  const int64_t blocks_per_row = p.grid_w / 2;
  for (int64_t r = 0; r < p.n; ++r) {
    const int64_t block = r / 4, dy = (r / 2) % 2, dx = r % 2;
    p.row.push_back(int32_t(block / blocks_per_row * 2 + dy));
    p.col.push_back(int32_t(block % blocks_per_row * 2 + dx));
  }
}

// GLM: RMSNorm, then the learned pos_grid x pos_grid table resampled (bicubic, half-pixel,
// taps clamped to the border) to the image's grid, at each token's patch.
void VisionEncoder::add_learned_positions(Pass& p) {
  const VisionSpec& s = model_.spec();
  const VisionWeights& w = model_.weights();
  const int64_t d = s.n_embd, g = s.pos_grid;
  rmsnorm_rows(p.x.data(), w.norm_embd, s.eps, d, p.n, p.x.data());
  std::vector<float> acc(static_cast<size_t>(d));
  for (int64_t t = 0; t < p.n; ++t) {
    const double iy = (p.row[size_t(t)] + 0.5) * double(g) / p.grid_h - 0.5;
    const double ix = (p.col[size_t(t)] + 0.5) * double(g) / p.grid_w - 0.5;
    const double fy = std::floor(iy), fx = std::floor(ix);
    double wy[4], wx[4];
    cubic_weights(iy - fy, wy);
    cubic_weights(ix - fx, wx);
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b) {
        const int64_t y = std::clamp<int64_t>(int64_t(fy) - 1 + a, 0, g - 1);
        const int64_t x = std::clamp<int64_t>(int64_t(fx) - 1 + b, 0, g - 1);
        const float weight = float(wy[a] * wx[b]);
        const float* src = w.pos_embd.data() + (y * g + x) * d;
        for (int64_t i = 0; i < d; ++i) acc[size_t(i)] += weight * src[i];
      }
    float* row = p.x.data() + t * d;
    for (int64_t i = 0; i < d; ++i) row[i] += acc[size_t(i)];
  }
}

// The 2-D rotary: each head's pairs (i, i + head_dim / 2) turn by the patch row (the first
// half of the pairs) or column (the second), at frequencies 10000^(-i / (head_dim / 4)).
void VisionEncoder::rotate(Pass& p, float* x) {
  const VisionSpec& s = model_.spec();
  const int64_t half = s.head_dim / 2;
  for (int64_t t = 0; t < p.n; ++t)
    cpu::rope_pairs(x + t * s.n_embd, int(s.n_head), int(s.head_dim), int(s.head_dim), p.rope_pos.data() + t * half,
                    p.rope_inv.data(), cpu::RopeStyle::kNeox);
}

// The rotary's angles for every layer, once per image: each pair's frequency, and each token's
// position per pair (its patch row on the first half of the pairs, its column on the second).
void VisionEncoder::rotary_table(Pass& p) {
  const int64_t half = model_.spec().head_dim / 2, quarter = half / 2;
  p.rope_inv.resize(size_t(half));
  for (int64_t i = 0; i < half; ++i) p.rope_inv[size_t(i)] = std::pow(10000.0, -double(i % quarter) / double(quarter));
  p.rope_pos.resize(size_t(p.n * half));
  for (int64_t t = 0; t < p.n; ++t)
    for (int64_t i = 0; i < half; ++i)
      p.rope_pos[size_t(t * half + i)] = float(i < quarter ? p.row[size_t(t)] : p.col[size_t(t)]);
}

void VisionEncoder::attention(Pass& p, const VisionLayerWeights& l, const std::vector<int64_t>& bounds) {
  const VisionSpec& s = model_.spec();
  const int64_t d = s.n_embd;
  for (auto* m : {&p.q, &p.k, &p.v, &p.attn}) m->resize(size_t(p.n * d));
  linear(l.wq, l.bq, p.xn.data(), p.n, p.q.data());
  linear(l.wk, l.bk, p.xn.data(), p.n, p.k.data());
  linear(l.wv, l.bv, p.xn.data(), p.n, p.v.data());
  rotate(p, p.q.data());
  rotate(p, p.k.data());
  p.attend->prepare(p.q.data(), p.k.data(), p.v.data(), bounds);
  // A unit of attention is about as much work as kUnitRows queries over 2048 keys: a whole
  // phone screenshot (13k patches) takes fewer queries per unit, so the engines wait no longer.
  const int64_t longest = bounds.size() == 2 ? p.n : 2048;
  const int64_t queries = std::clamp<int64_t>(kUnitRows * 2048 / std::max<int64_t>(longest, 1), 64, kUnitRows);
  for (int64_t q0 = 0; q0 < p.n; q0 += queries) {
    p.attend->run(q0, std::min(p.n, q0 + queries), p.attn.data());
    unit_done();
  }
  linear(l.wo, l.bo, p.attn.data(), p.n, p.xn.data());
}

// x += down(silu(gate(xn)) * up(xn)), kUnitRows rows at a time: the n_ff-wide activations of a
// unit, not of the whole image (13k patches x 13696 x 2 would be 1.5 GB), stay in cache-sized
// buffers.
void VisionEncoder::feed_forward(Pass& p, const VisionLayerWeights& l) {
  const VisionSpec& s = model_.spec();
  const int64_t d = s.n_embd;
  const int64_t unit = std::min(kUnitRows, p.n);
  p.gate.resize(size_t(unit * s.n_ff));
  p.up.resize(size_t(unit * s.n_ff));
  p.ffn_out.resize(size_t(unit * d));
  for (int64_t r0 = 0; r0 < p.n; r0 += unit) {
    const int64_t rows = std::min(unit, p.n - r0);
    linear(l.gate, l.b_gate, p.xn.data() + r0 * d, rows, p.gate.data());
    linear(l.up, l.b_up, p.xn.data() + r0 * d, rows, p.up.data());
    cpu::silu_mul(p.gate.data(), p.up.data(), rows * s.n_ff);
    linear(l.down, l.b_down, p.gate.data(), rows, p.ffn_out.data());
    float* x = p.x.data() + r0 * d;
    for (int64_t i = 0; i < rows * d; ++i) x[i] += p.ffn_out[size_t(i)];
  }
}

void VisionEncoder::run_block(Pass& p, int64_t il) {
  const VisionSpec& s = model_.spec();
  const VisionLayerWeights& l = model_.weights().layers[size_t(il)];
  const int64_t d = s.n_embd, n = p.n;
  p.xn.resize(size_t(n * d));
  rmsnorm_rows(p.x.data(), l.ln1, s.eps, d, n, p.xn.data());
  const std::vector<int64_t> whole = {0, n};
  attention(p, l, s.full_attention(il) ? whole : p.window_bounds);
  for (size_t i = 0; i < p.x.size(); ++i) p.x[i] += p.xn[i];
  rmsnorm_rows(p.x.data(), l.ln2, s.eps, d, n, p.xn.data());
  feed_forward(p, l);
}

// GLM: post_ln, the 2x2 downsample over each merge block's 4 rows (side by side in memory),
// proj, LayerNorm, GELU and the gated FFN.
ImageEmbedding VisionEncoder::glm_merger(Pass& p) {
  const VisionSpec& s = model_.spec();
  const VisionWeights& w = model_.weights();
  const int64_t units = p.n / 4, d = s.n_out;
  rmsnorm_rows(p.x.data(), w.post_ln, s.eps, s.n_embd, p.n, p.x.data());
  std::vector<float> merged(size_t(units * d)), projected(size_t(units * d));
  linear(w.merge, w.merge_bias, p.x.data(), units, merged.data());
  linear(w.fc, {}, merged.data(), units, projected.data());
  layer_norm(projected.data(), w.post_norm_w, w.post_norm_b, 1e-5f, d, units);
  gelu_erf(projected.data(), units * d);
  p.gate.resize(size_t(units * s.n_merger_ff));
  p.up.resize(size_t(units * s.n_merger_ff));
  linear(w.m_gate, {}, projected.data(), units, p.gate.data());
  linear(w.m_up, {}, projected.data(), units, p.up.data());
  cpu::silu_mul(p.gate.data(), p.up.data(), units * s.n_merger_ff);
  ImageEmbedding e{std::vector<float>(size_t(units * d)), p.grid_h / 2, p.grid_w / 2, d};
  linear(w.m_down, {}, p.gate.data(), units, e.values.data());
  return e;
}

// Qwen: ln_q per token, mm0 over each unit's 4 rows side by side, GELU, mm2; then the units go
// back from window order to raster order.
ImageEmbedding VisionEncoder::qwen_merger(Pass& p) {
  const VisionSpec& s = model_.spec();
  const VisionWeights& w = model_.weights();
  const int64_t units = p.n / 4, d = s.n_out;
  rmsnorm_rows(p.x.data(), w.post_ln, s.eps, s.n_embd, p.n, p.x.data());
  std::vector<float> hidden(size_t(units * 4 * s.n_embd)), out(size_t(units * d));
  linear(w.mm0, w.mm0_b, p.x.data(), units, hidden.data());
  gelu_erf(hidden.data(), int64_t(hidden.size()));
  linear(w.mm2, w.mm2_b, hidden.data(), units, out.data());
  ImageEmbedding e{std::vector<float>(size_t(units * d)), p.grid_h / 2, p.grid_w / 2, d};
  for (int64_t i = 0; i < units; ++i) std::copy_n(out.data() + i * d, d, e.values.data() + p.order[size_t(i)] * d);
  return e;
}

Result<ImageEmbedding> VisionEncoder::encode(const PixelPatches& patches) {
  const VisionSpec& s = model_.spec();
  if (patches.cols != s.patch_cols() || patches.grid_t != 1 || patches.grid_h % 2 != 0 || patches.grid_w % 2 != 0 ||
      patches.rows != int64_t(patches.grid_h) * patches.grid_w || patches.grid_h <= 0 || patches.grid_w <= 0)
    return invalid_argument("vision: patches of " + std::to_string(patches.rows) + " x " +
                            std::to_string(patches.cols) + " on a " + std::to_string(patches.grid_h) + " x " +
                            std::to_string(patches.grid_w) + " grid are not one image for this projector (" +
                            std::to_string(s.patch_cols()) + " columns, even grid)");
  Pass p;
  p.n = patches.rows;
  p.grid_h = patches.grid_h;
  p.grid_w = patches.grid_w;
  embed_patches(p, patches);
  if (s.projector == ProjectorType::kGlm4v) add_learned_positions(p);
  if (s.window_units > 0) {  // tokens regrouped by window, a merge unit's 4 rows kept together
    window_order(p.grid_h / 2, p.grid_w / 2, s.window_units, p.order, p.window_bounds);
    const int64_t d = s.n_embd;
    std::vector<float> x(p.x.size());
    std::vector<int32_t> row(p.row.size()), col(p.col.size());
    for (size_t i = 0; i < p.order.size(); ++i) {
      const int64_t from = 4 * p.order[i], to = 4 * int64_t(i);
      std::copy_n(p.x.data() + from * d, 4 * d, x.data() + to * d);
      std::copy_n(p.row.data() + from, 4, row.data() + to);
      std::copy_n(p.col.data() + from, 4, col.data() + to);
    }
    p.x.swap(x), p.row.swap(row), p.col.swap(col);
  }
  rotary_table(p);
  p.attend.emplace(pool_, s.n_head, s.head_dim);
  for (int64_t il = 0; il < s.n_layer; ++il) run_block(p, il);
  return s.projector == ProjectorType::kGlm4v ? glm_merger(p) : qwen_merger(p);
}

}  // namespace autoglm
