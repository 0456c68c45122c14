// The forward pass's ops on a CUDA GPU, as plain C++ declarations (the CUDA types stay in
// the .cu files). Every op is queued on a Queue (one CUDA stream with its cuBLAS handle);
// errors surface at finish. Pointers are device memory unless a name says host.
#pragma once

#include <cstdint>
#include <memory>

#include "autoglm/status.h"
#include "core/dtype.h"

namespace autoglm::cuda {

// One stream on one device, its cuBLAS handle, and scratch for activations quantized or
// converted for a matmul.
class Queue {
 public:
  static Result<std::unique_ptr<Queue>> create(int device);
  ~Queue();
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  int device() const { return device_; }
  // Makes this queue's GPU the calling thread's current one (kernels launch there): once per
  // pass, on the thread that queues its ops.
  Status make_current();
  // Host to device, ordered with the queued ops (the host buffer must live until finish).
  Status upload(void* dst, const void* host_src, int64_t bytes);
  // Device to host after every queued op, then waits: an error of any op since the last finish.
  Status download(void* host_dst, const void* src, int64_t bytes);
  // Waits for the queued ops; their first error.
  Status finish();
  // Scratch of at least `bytes`, valid until the next call (grows, never shrinks).
  void* scratch(int64_t bytes);

  void* stream() const { return stream_; }
  void* blas() const { return blas_; }

 private:
  explicit Queue(int device) : device_(device) {}
  int device_;
  void* stream_ = nullptr;
  void* blas_ = nullptr;
  void* scratch_ = nullptr;
  int64_t scratch_bytes_ = 0;
  Status deferred_;  // a failure no op could return (scratch allocation)
};

// Weight types the CUDA matmul and embedding read directly.
bool weight_type_supported(DType t);

// x[i] = row ids[i] of the table (rows of row_bytes, cols elements), decoded to floats.
void embed(Queue& q, DType type, const uint8_t* table, int64_t row_bytes, int64_t cols, const int32_t* ids, int64_t n,
           float* x);
// y[t, r] = sum_k W[r, k] x[t, k]: Q8_0, Q4_0 and Q4_K meet activations quantized to int8 blocks
// (as the CPU kernels do); the other block types are decoded to floats in the kernel (not yet
// the integer path); F16/BF16 prompts go through cuBLAS.
void matmul(Queue& q, DType type, const uint8_t* w, int64_t rows, int64_t cols, int64_t row_bytes, const float* x,
            int64_t n_tokens, float* y);
// y[r] += bias for rows of `width`.
void add_bias(Queue& q, float* y, const float* bias, int64_t width, int64_t rows);
// y[r] = x[r] / rms(x[r]) * w (w null: no scale); rows of `width`; y may be x.
void rmsnorm(Queue& q, const float* x, const float* w, float eps, int64_t width, int64_t rows, float* y);
// x[r] += delta[r], then (w not null) y[r] = rmsnorm(x[r]) * w.
void add_rmsnorm(Queue& q, float* x, const float* delta, const float* w, float eps, int64_t width, int64_t rows,
                 float* y);
// y[i] = rmsnorm(x[rows[i]]) * w for i < n.
void rmsnorm_gather(Queue& q, const float* x, const int32_t* rows, int64_t n, const float* w, float eps, int64_t width,
                    float* y);
// Rotary embedding of n_heads heads of head_dim per token at positions[t]; inv_freq: n_rot/2 doubles.
void rope(Queue& q, float* x, const int32_t* positions, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
          int64_t n_rot, const double* inv_freq, bool neox);
// gate[i] = silu(gate[i]) * up[i].
void silu_mul(Queue& q, float* gate, const float* up, int64_t n);

// Where the KV rows of the step's tokens are: each sequence slot's spans (runs of positions
// of `span` rows; its table entries start at span_first) hold layer 0 at the listed base,
// layer L at base + L * layer_stride.
struct KvTable {
  DType type;  // F32, F16 or Q8_0
  int64_t k_row_bytes, v_row_bytes;
  const uint8_t* const* k_spans;  // layer-0 bases
  const uint8_t* const* v_spans;
  const int64_t* slot_info;   // per slot: span, span_first, k_layer_stride, v_layer_stride
  const int32_t* token_slot;  // per token
  const int32_t* positions;   // per token
};

// Encodes the step's keys [T, kv_dim] and values [T, v_dim] into their rows of `layer`.
void store_kv(Queue& q, const KvTable& kv, int64_t layer, const float* k, int64_t kv_dim, const float* v, int64_t v_dim,
              int64_t n_tokens);

struct AttentionArgs {
  const float* q;
  int64_t q_stride;
  float* out;
  int64_t out_stride;
  int64_t n_tokens, n_heads, group, head_dim, head_dim_v;
  float scale;
  int64_t window;  // 0: all positions
  int64_t layer;
};
// Every query head of every token attends over positions [0, position] of its sequence.
void attention(Queue& q, const KvTable& kv, const AttentionArgs& a);

}  // namespace autoglm::cuda
