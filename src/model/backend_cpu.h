// The forward pass's ops on the CPU: the kernels of kernels/cpu, split over the thread pool.
#pragma once

#include <vector>

#include "model/backend.h"
#include "model/expert_ffn.h"

namespace autoglm {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(ThreadPool& pool) : pool_(pool) {}
  Device device() const override { return Device{}; }

  Status begin_step(const Batch& batch, const int32_t* tile_start, int64_t n_tiles) override;
  void embed(const cpu::WeightMatrix& table, float* x) override;
  void matmul(const cpu::WeightMatrix& w, const float* x, int64_t n_rows, float* y) override;
  void matmul_multi(const cpu::WeightMatrix* const* ws, float* const* ys, int n, const float* x,
                    int64_t n_rows) override;
  void add_bias(float* y, const Vec& bias, int64_t n_rows) override;
  void rmsnorm(const float* x, const Vec& w, float eps, int64_t width, int64_t n_rows, float* y) override;
  void add_rmsnorm(float* x, const float* delta, const Vec* w, float eps, int64_t width, int64_t n_rows,
                   float* y) override;
  void rmsnorm_logit_rows(const float* x, const Vec& w, float eps, int64_t width, float* y) override;
  void rope(float* x, int64_t n_heads, const RopeTable& rope) override;
  void silu_mul(float* gate, const float* up, int64_t n) override;
  void activation(const ModelSpec& spec, float* gate, const float* up, int64_t n) override;
  void experts(const ExpertWeights& w, const ModelSpec& spec, float* router_logits, const float* x, float* y) override;
  void copy_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t width,
                 int64_t n_rows) override;
  void store_kv(int64_t layer, const float* k, int64_t kv_dim, const float* v, int64_t v_dim) override;
  void attention(int64_t layer, const float* q, int64_t q_stride, float* out, int64_t out_stride,
                 const AttentionShape& shape) override;
  Status read_back(const float* src, int64_t n, float* dst) override;

 private:
  ThreadPool& pool_;
  const Batch* batch_ = nullptr;
  const int32_t* tile_start_ = nullptr;
  int64_t n_tiles_ = 0;
  std::vector<float> attention_scratch_;  // per pool thread: attention_scratch_floats
  std::vector<int32_t> expert_ids_;       // [T, n_expert_used] of the current layer
  std::vector<float> expert_weights_;
  ExpertScratch expert_scratch_;
};

}  // namespace autoglm
