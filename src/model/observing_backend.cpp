#include "model/observing_backend.h"

#include <vector>

#include "kernels/cpu/matmul.h"
#include "model/batch.h"
#include "model/expert_ffn.h"
#include "model/expert_routing.h"
#include "model/model_spec.h"
#include "model/weights.h"

namespace autoglm {
namespace {

class ObservingBackend final : public Backend {
 public:
  ObservingBackend(std::unique_ptr<Backend> inner, MatmulObserver& observer, ThreadPool& pool)
      : inner_(std::move(inner)), observer_(observer), pool_(pool) {}

  Device device() const override { return inner_->device(); }
  Status begin_step(const Batch& batch, const int32_t* tile_start, int64_t n_tiles) override {
    n_tokens_ = int64_t(batch.tokens.size());
    return inner_->begin_step(batch, tile_start, n_tiles);
  }
  void embed(const cpu::WeightMatrix& table, float* x) override { inner_->embed(table, x); }
  void matmul(const cpu::WeightMatrix& w, const float* x, int64_t n_rows, float* y) override {
    observer_.on_matmul(w, x, n_rows);
    inner_->matmul(w, x, n_rows, y);
  }
  void matmul_multi(const cpu::WeightMatrix* const* ws, float* const* ys, int n, const float* x,
                    int64_t n_rows) override {
    for (int i = 0; i < n; ++i) observer_.on_matmul(*ws[i], x, n_rows);
    inner_->matmul_multi(ws, ys, n, x, n_rows);
  }
  void add_bias(float* y, const Vec& bias, int64_t n_rows) override { inner_->add_bias(y, bias, n_rows); }
  void rmsnorm(const float* x, const Vec& w, float eps, int64_t width, int64_t n_rows, float* y) override {
    inner_->rmsnorm(x, w, eps, width, n_rows, y);
  }
  void add_rmsnorm(float* x, const float* delta, const Vec* w, float eps, int64_t width, int64_t n_rows,
                   float* y) override {
    inner_->add_rmsnorm(x, delta, w, eps, width, n_rows, y);
  }
  void rmsnorm_logit_rows(const float* x, const Vec& w, float eps, int64_t width, float* y) override {
    inner_->rmsnorm_logit_rows(x, w, eps, width, y);
  }
  void rope(float* x, int64_t n_heads, const RopeTable& rope) override { inner_->rope(x, n_heads, rope); }
  void silu_mul(float* gate, const float* up, int64_t n) override { inner_->silu_mul(gate, up, n); }
  void activation(const ModelSpec& spec, float* gate, const float* up, int64_t n) override {
    inner_->activation(spec, gate, up, n);
  }
  void experts(const ExpertWeights& w, const ModelSpec& spec, float* router_logits, const float* x, float* y) override {
    observe_experts(w, spec, router_logits, x);
    inner_->experts(w, spec, router_logits, x, y);
  }
  void copy_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t width,
                 int64_t n_rows) override {
    inner_->copy_rows(src, src_stride, dst, dst_stride, width, n_rows);
  }
  void store_kv(int64_t layer, const float* k, int64_t kv_dim, const float* v, int64_t v_dim) override {
    inner_->store_kv(layer, k, kv_dim, v, v_dim);
  }
  void attention(int64_t layer, const float* q, int64_t q_stride, float* out, int64_t out_stride,
                 const AttentionShape& shape) override {
    inner_->attention(layer, q, q_stride, out, out_stride, shape);
  }
  Status read_back(const float* src, int64_t n, float* dst) override { return inner_->read_back(src, n, dst); }

 private:
  // One FFN's gate and up over `rows` inputs, the down projection's input made from them.
  void observe_ffn(const ModelSpec& spec, const cpu::WeightMatrix& gate, const cpu::WeightMatrix& up,
                   const cpu::WeightMatrix& down, const float* x, int64_t rows, const float* gate_bias,
                   const float* up_bias) {
    observer_.on_matmul(gate, x, rows);
    observer_.on_matmul(up, x, rows);
    const int64_t n_ff = gate.rows;
    g_.resize(size_t(rows * n_ff));
    u_.resize(size_t(rows * n_ff));
    cpu::matmul(pool_, gate, x, rows, g_.data());
    cpu::matmul(pool_, up, x, rows, u_.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; gate_bias && i < n_ff; ++i)
        g_[size_t(r * n_ff + i)] += gate_bias[i], u_[size_t(r * n_ff + i)] += up_bias[i];
    apply_activation(spec, g_.data(), u_.data(), rows * n_ff);
    observer_.on_matmul(down, g_.data(), rows);
  }

  void observe_experts(const ExpertWeights& w, const ModelSpec& spec, const float* router_logits, const float* x) {
    const MoeSpec& moe = spec.moe;
    std::vector<float> logits(router_logits, router_logits + n_tokens_ * moe.n_expert);
    route_layer(moe, logits.data(), w.router_bias, w.selection_bias, n_tokens_, ids_, weights_);
    const int64_t cols = w.gate.empty() ? 0 : w.gate[0].cols;
    for (int64_t t = 0; t < n_tokens_ && cols > 0; ++t)
      for (int64_t k = 0; k < moe.n_expert_used; ++k) {
        const int64_t e = ids_[size_t(t * moe.n_expert_used + k)];
        const int64_t n_ff = w.gate[size_t(e)].rows;
        const bool biased = !w.gate_bias.empty();
        observe_ffn(spec, w.gate[size_t(e)], w.up[size_t(e)], w.down[size_t(e)], x + t * cols, 1,
                    biased ? w.gate_bias.data() + e * n_ff : nullptr, biased ? w.up_bias.data() + e * n_ff : nullptr);
      }
    if (w.shared_gate.rows > 0 && cols > 0)
      observe_ffn(spec, w.shared_gate, w.shared_up, w.shared_down, x, n_tokens_, nullptr, nullptr);
  }

  std::unique_ptr<Backend> inner_;
  MatmulObserver& observer_;
  ThreadPool& pool_;
  int64_t n_tokens_ = 0;
  std::vector<int32_t> ids_;
  std::vector<float> weights_, g_, u_;
};

}  // namespace

std::unique_ptr<Backend> observing_backend(std::unique_ptr<Backend> inner, MatmulObserver& observer, ThreadPool& pool) {
  return std::make_unique<ObservingBackend>(std::move(inner), observer, pool);
}

}  // namespace autoglm
