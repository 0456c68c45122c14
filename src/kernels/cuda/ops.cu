// Embedding, norms, RoPE, SiLU, biases and the KV rows on the GPU (cuda_ops.h).
#include <cuda_runtime.h>

#include "kernels/cuda/blocks.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace autoglm::cuda {
namespace {

constexpr int kThreads = 256;

cudaStream_t stream_of(Queue& q) {
  return static_cast<cudaStream_t>(q.stream());
}

unsigned blocks_for(int64_t n) {
  return unsigned((n + kThreads - 1) / kThreads);
}

__global__ void embed_kernel(DType type, const uint8_t* table, int64_t row_bytes, int64_t cols, const int32_t* ids,
                             float* x) {
  const int64_t t = blockIdx.y;
  const uint8_t* row = table + int64_t(ids[t]) * row_bytes;
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < cols; i += int64_t(gridDim.x) * blockDim.x)
    x[t * cols + i] = decode_element(type, row, i);
}

__global__ void add_bias_kernel(float* y, const float* bias, int64_t width, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] += bias[i % width];
}

// One block per row: the sum of squares in double (as the CPU), then the scaled row.
// src_rows: the row of x each output row reads (null: the same index). add: x += add first.
__global__ void rmsnorm_kernel(float* x, const float* add, const int32_t* src_rows, const float* w, float eps,
                               int64_t width, float* y) {
  __shared__ double shared[32];
  const int64_t r = blockIdx.x;
  float* row = x + (src_rows ? int64_t(src_rows[r]) : r) * width;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    if (add) row[i] += add[r * width + i];
    sum += double(row[i]) * double(row[i]);
  }
  if (!y) return;  // the residual add alone
  sum = block_sum(sum, shared);
  const float scale = float(1.0 / sqrt(sum / double(width) + double(eps)));
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) y[r * width + i] = row[i] * scale * (w ? w[i] : 1.0f);
}

__global__ void rope_kernel(float* x, const int32_t* positions, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                            const double* inv_freq, bool neox) {
  const int64_t t = blockIdx.y, half = n_rot / 2;
  const int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;  // head * half + pair
  if (k >= n_heads * half) return;
  const int64_t h = k / half, i = k % half;
  const double theta = double(positions[t]) * inv_freq[i];
  const float c = float(cos(theta)), s = float(sin(theta));
  float* v = x + (t * n_heads + h) * head_dim;
  const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
  const float x0 = v[a], x1 = v[b];
  v[a] = x0 * c - x1 * s;
  v[b] = x0 * s + x1 * c;
}

__global__ void silu_mul_kernel(float* gate, const float* up, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

__device__ inline const int64_t* slot_info(const KvTable& kv, int slot) {
  return kv.slot_info + 4 * slot;  // span, span_first, k_layer_stride, v_layer_stride
}

// The row of position `pos` of a slot's keys (values: false) at `layer`.
__device__ inline uint8_t* kv_row(const KvTable& kv, int slot, int64_t layer, int64_t pos, bool keys) {
  const int64_t* info = slot_info(kv, slot);
  const int64_t span = info[0], entry = info[1] + pos / span;
  const uint8_t* base = keys ? kv.k_spans[entry] : kv.v_spans[entry];
  return const_cast<uint8_t*>(base) + layer * info[keys ? 2 : 3] +
         (pos % span) * (keys ? kv.k_row_bytes : kv.v_row_bytes);
}

// One block per (token, keys or values): F32/F16 element-wise; Q8_0 one warp per block of 32
// (scale amax/127 as fp16, codes rounded half away from zero: kernels/ref/quants.cpp).
__global__ void store_kv_kernel(KvTable kv, int64_t layer, const float* k, int64_t kv_dim, const float* v,
                                int64_t v_dim) {
  const int64_t t = blockIdx.x;
  const bool keys = blockIdx.y == 0;
  const int64_t n = keys ? kv_dim : v_dim;
  const float* src = (keys ? k : v) + t * n;
  uint8_t* dst = kv_row(kv, kv.token_slot[t], layer, kv.positions[t], keys);
  if (kv.type == DType::F32) {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) reinterpret_cast<float*>(dst)[i] = src[i];
  } else if (kv.type == DType::F16) {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) reinterpret_cast<__half*>(dst)[i] = __float2half_rn(src[i]);
  } else {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
    for (int64_t b = warp; b < n / 32; b += n_warps) {
      const float x = src[b * 32 + lane];
      const float d = warp_max(fabsf(x)) / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      uint8_t* block = dst + b * 34;
      if (lane == 0) {
        const uint16_t h = __half_as_ushort(__float2half_rn(d));
        block[0] = uint8_t(h & 0xff);
        block[1] = uint8_t(h >> 8);
      }
      reinterpret_cast<int8_t*>(block + 2)[lane] = int8_t(fminf(fmaxf(roundf(x * id), -127.0f), 127.0f));
    }
  }
}

int64_t head_bytes(DType type, int64_t dim) {
  return type == DType::F32 ? dim * 4 : type == DType::F16 ? dim * 2 : dim / 32 * 34;
}

// One block per (token, query head): positions in chunks of blockDim, each thread scoring one
// position; an online softmax rescales the running output (each thread owns a few of its dims).
constexpr int kAttentionThreads = 128;
constexpr int kMostDimsPerThread = 4;  // head_dim_v <= 512

__global__ void attention_kernel(KvTable kv, AttentionArgs a, int64_t k_head_bytes, int64_t v_head_bytes) {
  __shared__ float reduce[32];
  __shared__ float p[kAttentionThreads];
  extern __shared__ float q[];
  const int64_t t = blockIdx.x, h = blockIdx.y, kv_head = h / a.group;
  const int slot = kv.token_slot[t];
  const int64_t n_pos = int64_t(kv.positions[t]) + 1;
  const int64_t first = a.window > 0 && n_pos > a.window ? n_pos - a.window : 0;
  for (int64_t d = threadIdx.x; d < a.head_dim; d += blockDim.x) q[d] = a.q[t * a.q_stride + h * a.head_dim + d];
  __syncthreads();
  float m = -INFINITY, l = 0, acc[kMostDimsPerThread] = {};
  for (int64_t c = first; c < n_pos; c += blockDim.x) {
    const int64_t pos = c + threadIdx.x;
    float s = -INFINITY;
    if (pos < n_pos) {
      const uint8_t* key = kv_row(kv, slot, a.layer, pos, true) + kv_head * k_head_bytes;
      float dot = 0;
      for (int64_t d = 0; d < a.head_dim; ++d) dot += q[d] * decode_element(kv.type, key, d);
      s = dot * a.scale;
    }
    const float m_new = fmaxf(m, block_max(s, reduce));
    const float alpha = m == -INFINITY ? 0.0f : expf(m - m_new);
    const float e = pos < n_pos ? expf(s - m_new) : 0.0f;
    l = l * alpha + block_sum(e, reduce);
    p[threadIdx.x] = e;
    __syncthreads();
    const int64_t n_in = min(int64_t(blockDim.x), n_pos - c);
    for (int i = 0; i < kMostDimsPerThread; ++i) {
      const int64_t d = threadIdx.x + int64_t(i) * blockDim.x;
      if (d >= a.head_dim_v) break;
      float sum = 0;
      for (int64_t j = 0; j < n_in; ++j)
        sum += p[j] * decode_element(kv.type, kv_row(kv, slot, a.layer, c + j, false) + kv_head * v_head_bytes, d);
      acc[i] = acc[i] * alpha + sum;
    }
    m = m_new;
    __syncthreads();
  }
  for (int i = 0; i < kMostDimsPerThread; ++i) {
    const int64_t d = threadIdx.x + int64_t(i) * blockDim.x;
    if (d < a.head_dim_v) a.out[t * a.out_stride + h * a.head_dim_v + d] = acc[i] / l;
  }
}

}  // namespace

void embed(Queue& q, DType type, const uint8_t* table, int64_t row_bytes, int64_t cols, const int32_t* ids, int64_t n,
           float* x) {
  embed_kernel<<<dim3(blocks_for(cols), unsigned(n)), kThreads, 0, stream_of(q)>>>(type, table, row_bytes, cols, ids,
                                                                                   x);
}

void add_bias(Queue& q, float* y, const float* bias, int64_t width, int64_t rows) {
  add_bias_kernel<<<blocks_for(width * rows), kThreads, 0, stream_of(q)>>>(y, bias, width, width * rows);
}

void rmsnorm(Queue& q, const float* x, const float* w, float eps, int64_t width, int64_t rows, float* y) {
  rmsnorm_kernel<<<unsigned(rows), kThreads, 0, stream_of(q)>>>(const_cast<float*>(x), nullptr, nullptr, w, eps, width,
                                                                y);
}

void add_rmsnorm(Queue& q, float* x, const float* delta, const float* w, float eps, int64_t width, int64_t rows,
                 float* y) {
  rmsnorm_kernel<<<unsigned(rows), kThreads, 0, stream_of(q)>>>(x, delta, nullptr, w, eps, width, w ? y : nullptr);
}

void rmsnorm_gather(Queue& q, const float* x, const int32_t* rows, int64_t n, const float* w, float eps, int64_t width,
                    float* y) {
  if (n == 0) return;
  rmsnorm_kernel<<<unsigned(n), kThreads, 0, stream_of(q)>>>(const_cast<float*>(x), nullptr, rows, w, eps, width, y);
}

void rope(Queue& q, float* x, const int32_t* positions, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
          int64_t n_rot, const double* inv_freq, bool neox) {
  rope_kernel<<<dim3(blocks_for(n_heads * (n_rot / 2)), unsigned(n_tokens)), kThreads, 0, stream_of(q)>>>(
      x, positions, n_heads, head_dim, n_rot, inv_freq, neox);
}

void silu_mul(Queue& q, float* gate, const float* up, int64_t n) {
  silu_mul_kernel<<<blocks_for(n), kThreads, 0, stream_of(q)>>>(gate, up, n);
}

void store_kv(Queue& q, const KvTable& kv, int64_t layer, const float* k, int64_t kv_dim, const float* v, int64_t v_dim,
              int64_t n_tokens) {
  store_kv_kernel<<<dim3(unsigned(n_tokens), 2), kThreads, 0, stream_of(q)>>>(kv, layer, k, kv_dim, v, v_dim);
}

void attention(Queue& q, const KvTable& kv, const AttentionArgs& a) {
  const size_t q_bytes = size_t(a.head_dim) * sizeof(float);
  attention_kernel<<<dim3(unsigned(a.n_tokens), unsigned(a.n_heads)), kAttentionThreads, q_bytes, stream_of(q)>>>(
      kv, a, head_bytes(kv.type, a.head_dim), head_bytes(kv.type, a.head_dim_v));
}

}  // namespace autoglm::cuda
