// The seam between the forward pass and a device. ModelRunner reads like llama2.c over
// these calls; the CPU backend runs the kernels of kernels/cpu on the thread pool, the CUDA
// backend (CUDA builds) those of kernels/cuda on one stream of a GPU.
//
// Activations are pointers into DeviceMemory of the backend's device. Weights and
// per-channel vectors are named by the host objects of ModelWeights: the CPU reads them
// where they are (the mapped file), CUDA looks up the copies placed on the device at load.
// Ops are queued, not awaited: read_back ends a pass and reports an op's failure.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "autoglm/status.h"
#include "core/device.h"
#include "core/thread_pool.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "model/attention.h"
#include "model/batch.h"
#include "model/model_spec.h"
#include "model/weights.h"

namespace autoglm {

// The rotary embedding of one model: n_rot/2 angles per position (inv_freq), over the first
// n_rot dims of each head of head_dim.
struct RopeTable {
  const double* inv_freq;
  int64_t head_dim, n_rot;
  cpu::RopeStyle style;
  float mscale = 1.0f;  // cos and sin times this (YaRN)
  // M-RoPE: the axis of each pair (ModelSpec::rope_pair_axes), read with the batch's
  // rope_positions; null: one position.
  const uint8_t* pair_axes = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;

  // Once per pass, before its ops: the batch (its tokens, positions, caches and logit rows)
  // and its attention tiles, runs of consecutive positions of one sequence (tile i holds the
  // tokens [tile_start[i], tile_start[i + 1])). Both stay alive until read_back. An error:
  // the batch cannot run here (a cache outside this device's memory).
  virtual Status begin_step(const Batch& batch, const int32_t* tile_start, int64_t n_tiles) = 0;

  // x[t] = the table's row for token t of the step.
  virtual void embed(const cpu::WeightMatrix& table, float* x) = 0;
  // y = x W^T for n_rows rows of x (matmul.h); matmul_multi: several matrices, one input.
  virtual void matmul(const cpu::WeightMatrix& w, const float* x, int64_t n_rows, float* y) = 0;
  virtual void matmul_multi(const cpu::WeightMatrix* const* ws, float* const* ys, int n, const float* x,
                            int64_t n_rows) = 0;
  // y[r] += bias for n_rows rows of bias.size() floats.
  virtual void add_bias(float* y, const Vec& bias, int64_t n_rows) = 0;
  // y[r] = rmsnorm(x[r]) * w for n_rows rows of `width` floats (y may be x).
  virtual void rmsnorm(const float* x, const Vec& w, float eps, int64_t width, int64_t n_rows, float* y) = 0;
  // x[r] += delta[r]; then, when w is not null, y[r] = rmsnorm(x[r]) * w.
  virtual void add_rmsnorm(float* x, const float* delta, const Vec* w, float eps, int64_t width, int64_t n_rows,
                           float* y) = 0;
  // y[i] = rmsnorm(x[batch.logit_tokens[i]]) * w: the rows whose logits the step wants.
  virtual void rmsnorm_logit_rows(const float* x, const Vec& w, float eps, int64_t width, float* y) = 0;
  // Rotates n_heads heads of every token of the step at its position; x is [T, n_heads * head_dim].
  virtual void rope(float* x, int64_t n_heads, const RopeTable& rope) = 0;
  // gate[i] = silu(gate[i]) * up[i].
  virtual void silu_mul(float* gate, const float* up, int64_t n) = 0;

  // The ops below serve mixture-of-experts and latent-attention models; Model::load refuses
  // those models on devices whose backend lacks them, so the defaults (which stop the
  // process) are never reached.
  // The model's gated activation (FfnActivation) of n hidden values.
  virtual void activation(const ModelSpec& spec, float* gate, const float* up, int64_t n);
  // A layer's routed (and shared) experts: router_logits [T, n_expert] pick each token's
  // experts; y[t] = their weighted outputs for x[t] (both [T, n_embd]).
  virtual void experts(const ExpertWeights& w, const ModelSpec& spec, float* router_logits, const float* x, float* y);
  // n_rows rows of `width` floats from src (rows src_stride apart) to dst (dst_stride apart).
  virtual void copy_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t width,
                         int64_t n_rows);
  // Writes the step's keys [T, kv_dim] and values [T, v_dim] into their caches' rows of `layer`.
  virtual void store_kv(int64_t layer, const float* k, int64_t kv_dim, const float* v, int64_t v_dim) = 0;
  // For every tile and KV head: its query heads (q, rows of q_stride) attend over their
  // sequence's cache at `layer`; results to out (rows of out_stride).
  virtual void attention(int64_t layer, const float* q, int64_t q_stride, float* out, int64_t out_stride,
                         const AttentionShape& shape) = 0;

  // Ends the pass: n floats from src to host memory, after every queued op; an error of any op.
  virtual Status read_back(const float* src, int64_t n, float* dst) = 0;
};

// The model's weights where a device's kernels read them (CUDA: copies in device memory).
// The CPU reads the mapped file and places nothing.
class PlacedWeights {
 public:
  virtual ~PlacedWeights() = default;
  virtual int64_t bytes() const = 0;
};

// llama.cpp's --n-cpu-moe N: the routed experts of layers [0, N) stay in host memory (the
// mapped file) and run on the CPU while the rest of the model runs on a GPU, so a model
// whose experts do not fit in GPU memory still runs there. --cpu-moe is every layer.
inline constexpr int64_t kCpuMoeAllLayers = std::numeric_limits<int64_t>::max();

// Per layer of the spec: whether its routed experts stay in host memory under n_cpu_moe
// (false for dense layers, which have none). Counts layers, not MoE layers, as llama.cpp does.
std::vector<bool> host_expert_layers(const ModelSpec& spec, int64_t n_cpu_moe);

// Whether the device's backend has every op the architecture needs; an error names the first missing one.
Status device_runs_spec(const Device& device, const ModelSpec& spec);

}  // namespace autoglm
