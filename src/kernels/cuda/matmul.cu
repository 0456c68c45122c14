// y = x W^T on the GPU for the weight types of cuda_ops.h. Decode-sized batches: one warp per
// weight row and a tile of tokens per warp (the row's blocks are read once for the tile);
// quantized rows meet activations quantized to int8 blocks (Q8_0 layout for Q4_0/Q8_0, blocks
// of 256 with sums per 32 for Q4_K), as the CPU kernels do, and float rows are read 16 bytes
// per lane. Prompts (kBlasMinTokens or more): one cuBLAS GEMM in F16 (BF16 for BF16 weights),
// block types decoded to F16 first.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/cuda/blocks.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace autoglm::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kTokenTile = 8;
constexpr int64_t kBlasMinTokens = 16;  // fewer: the warp kernels (a GEMV does not pay cuBLAS's setup)

cudaStream_t stream_of(Queue& q) {
  return static_cast<cudaStream_t>(q.stream());
}

// Activations as int8 codes [T][cols], a scale per block of `block` (32 or 256) and, for 256,
// the sum of the codes of each 32.
struct QuantizedActivations {
  int8_t* codes;
  float* scales;
  int32_t* sums32;
  int64_t cols;
  int block;
};

// One warp per block of the activations (symmetric int8, d = amax/127, codes rounded to even:
// kernels/ref/q8_activations.cpp).
__global__ void quantize_activations_kernel(const float* x, int64_t n_blocks, QuantizedActivations a) {
  const int64_t b = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
  if (b >= n_blocks) return;
  const int lane = threadIdx.x % 32, per_lane = a.block / 32;
  const float* src = x + b * a.block;
  float amax = 0;
  for (int k = 0; k < per_lane; ++k) amax = fmaxf(amax, fabsf(src[lane + 32 * k]));
  const float d = warp_max(amax) / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
  for (int k = 0; k < per_lane; ++k) {
    const int code = int(fminf(fmaxf(rintf(src[lane + 32 * k] * id), -127.0f), 127.0f));
    a.codes[b * a.block + lane + 32 * k] = int8_t(code);
  }
  if (lane == 0) a.scales[b] = d;
  if (a.block == 256) {
    __syncwarp();
    for (int s = 0; s < 8; ++s) {
      const int32_t sum = int32_t(warp_sum(float(a.codes[b * 256 + 32 * s + lane])));
      if (lane == 0) a.sums32[b * 8 + s] = sum;
    }
  }
}

// The contribution of sub-block s (32 weights) of a row to the dot with token t's codes.
__device__ inline float sub_block_dot(DType type, const uint8_t* row, int64_t s, const QuantizedActivations& a,
                                      int64_t t) {
  const int8_t* x = a.codes + t * a.cols + s * 32;
  if (type == DType::Q8_0) {
    const uint8_t* b = row + s * 34;
    const int8_t* w = reinterpret_cast<const int8_t*>(b + 2);
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) sum += int32_t(w[i]) * int32_t(x[i]);
    return load_half(b) * a.scales[t * (a.cols / 32) + s] * float(sum);
  }
  if (type == DType::Q4_0) {
    const uint8_t* b = row + s * 18;
    int32_t sum = 0;
    for (int i = 0; i < 16; ++i) {
      sum += ((b[2 + i] & 0x0f) - 8) * int32_t(x[i]);
      sum += ((b[2 + i] >> 4) - 8) * int32_t(x[i + 16]);
    }
    return load_half(b) * a.scales[t * (a.cols / 32) + s] * float(sum);
  }
  // Q4_K: sub-block j of super-block s / 8: nibbles of group j / 2, low or high.
  const uint8_t* b = row + (s / 8) * 144;
  const int j = int(s % 8);
  int sc, m;
  k_scale_min(j, b + 4, sc, m);
  const uint8_t* q = b + 16 + 32 * (j / 2);
  int32_t sum = 0;
  for (int i = 0; i < 32; ++i) sum += int32_t(j % 2 ? q[i] >> 4 : q[i] & 0x0f) * int32_t(x[i]);
  const int64_t super = t * (a.cols / 256) + s / 8;
  const float ad = a.scales[super];
  return load_half(b) * float(sc) * ad * float(sum) - load_half(b + 2) * float(m) * ad * float(a.sums32[super * 8 + j]);
}

// The lanes' share of one row's dot with each token of a tile: int8 sub-blocks of 32 ...
struct QuantizedRows {
  DType type;
  QuantizedActivations a;
  __device__ void accumulate(const uint8_t* row, int lane, int64_t t0, int64_t n_tile, float* acc) const {
    for (int64_t s = lane; s < a.cols / 32; s += 32)
#pragma unroll
      for (int t = 0; t < kTokenTile; ++t) {  // compile-time indices keep acc in registers
        if (t >= n_tile) break;
        acc[t] += sub_block_dot(type, row, s, a, t0 + t);
      }
  }
};

// ... or elements decoded to floats against float activations.
struct FloatRows {
  DType type;
  int64_t cols;
  const float* x;
  __device__ void accumulate(const uint8_t* row, int lane, int64_t t0, int64_t n_tile, float* acc) const {
    for (int64_t i = lane; i < cols; i += 32) {
      const float wi = decode_element(type, row, i);
#pragma unroll
      for (int t = 0; t < kTokenTile; ++t) {
        if (t >= n_tile) break;
        acc[t] += wi * x[(t0 + t) * cols + i];
      }
    }
  }
};

// ... or F32/F16/BF16 rows read 16 bytes per lane per step (4 or 8 elements), the type fixed at
// compile time so that the loop unrolls and several loads are in flight: a decode step reads
// each weight once, so it runs at the speed the loads are issued. Rows and activations 16-byte
// aligned (wide_rows_fit).
template <DType kType>
struct WideFloatRows {
  static constexpr int kElems = kType == DType::F32 ? 4 : 8;
  int64_t cols;
  const float* x;
  __device__ static void decode(const uint4& raw, float* out) {
    if constexpr (kType == DType::F32) {
      out[0] = __uint_as_float(raw.x), out[1] = __uint_as_float(raw.y);
      out[2] = __uint_as_float(raw.z), out[3] = __uint_as_float(raw.w);
    } else if constexpr (kType == DType::F16) {
      const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 f = __half22float2(h[k]);
        out[2 * k] = f.x, out[2 * k + 1] = f.y;
      }
    } else {
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 f = __bfloat1622float2(h[k]);
        out[2 * k] = f.x, out[2 * k + 1] = f.y;
      }
    }
  }
  __device__ void accumulate(const uint8_t* row, int lane, int64_t t0, int64_t n_tile, float* acc) const {
    const uint4* w = reinterpret_cast<const uint4*>(row);
    const int64_t n_vec = cols / kElems;
#pragma unroll 4
    for (int64_t v = lane; v < n_vec; v += 32) {
      float wf[kElems];
      decode(w[v], wf);
#pragma unroll
      for (int t = 0; t < kTokenTile; ++t) {
        if (t >= n_tile) break;
        const float4* xt = reinterpret_cast<const float4*>(x + (t0 + t) * cols + v * kElems);
        float sum = 0;
#pragma unroll
        for (int k = 0; k < kElems / 4; ++k) {
          const float4 xv = xt[k];
          sum += wf[4 * k] * xv.x + wf[4 * k + 1] * xv.y + wf[4 * k + 2] * xv.z + wf[4 * k + 3] * xv.w;
        }
        acc[t] += sum;
      }
    }
  }
};

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Whole 16-byte steps in every row, from 16-byte aligned rows and activations.
bool wide_rows_fit(DType type, const uint8_t* w, int64_t cols, int64_t row_bytes, const float* x) {
  const bool float_type = type == DType::F32 || type == DType::F16 || type == DType::BF16;
  return float_type && cols % 8 == 0 && row_bytes % 16 == 0 && aligned16(w) && aligned16(x);
}

// One warp per weight row and a tile of kTokenTile tokens: the lanes' partial dots, summed.
template <class Rows>
__global__ void matmul_kernel(Rows rows_dot, const uint8_t* w, int64_t rows, int64_t row_bytes, int64_t n_tokens,
                              float* y) {
  const int64_t r = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
  const int64_t t0 = blockIdx.y * int64_t(kTokenTile);
  if (r >= rows) return;  // the whole warp: it shares r
  const int lane = threadIdx.x % 32;
  const int64_t n_tile = min(int64_t(kTokenTile), n_tokens - t0);
  float acc[kTokenTile] = {};
  rows_dot.accumulate(w + r * row_bytes, lane, t0, n_tile, acc);
#pragma unroll
  for (int t = 0; t < kTokenTile; ++t) {
    if (t >= n_tile) break;
    const float sum = warp_sum(acc[t]);
    if (lane == 0) y[(t0 + t) * rows + r] = sum;
  }
}

__global__ void round_activations_kernel(const float* x, int64_t n, bool bf16, void* out) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  if (bf16)
    static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(x[i]);
  else
    static_cast<__half*>(out)[i] = __float2half_rn(x[i]);
}

dim3 matmul_grid(int64_t rows, int64_t n_tokens) {
  return dim3(unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock),
              unsigned((n_tokens + kTokenTile - 1) / kTokenTile));
}

// Rows of a block type decoded to F16 [rows][cols], for the prompt GEMM.
__global__ void decode_rows_kernel(DType type, const uint8_t* w, int64_t cols, int64_t row_bytes, int64_t n,
                                   __half* out) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(decode_element(type, w + (i / cols) * row_bytes, i % cols));
}

// F16 or BF16 weights as they are; other types decoded to F16 in scratch first.
void matmul_blas(Queue& q, DType type, const uint8_t* w, int64_t rows, int64_t cols, int64_t row_bytes, const float* x,
                 int64_t n_tokens, float* y) {
  const bool as_is = type == DType::F16 || type == DType::BF16;
  const int64_t weight_bytes = as_is ? 0 : rows * cols * 2;
  uint8_t* scratch = static_cast<uint8_t*>(q.scratch(weight_bytes + n_tokens * cols * 2));
  if (!scratch) return;  // finish reports the allocation failure
  if (!as_is) {
    const int64_t n = rows * cols;
    decode_rows_kernel<<<unsigned((n + 255) / 256), 256, 0, stream_of(q)>>>(type, w, cols, row_bytes, n,
                                                                            reinterpret_cast<__half*>(scratch));
    w = scratch;
  }
  void* rounded = scratch + weight_bytes;
  const int64_t n = n_tokens * cols;
  const bool bf16 = type == DType::BF16;
  round_activations_kernel<<<unsigned((n + 255) / 256), 256, 0, stream_of(q)>>>(x, n, bf16, rounded);
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  // Column-major: Y^T [rows, T] = W [rows, cols] (the row-major W read transposed) x X^T [cols, T].
  cublasGemmEx(static_cast<cublasHandle_t>(q.blas()), CUBLAS_OP_T, CUBLAS_OP_N, int(rows), int(n_tokens), int(cols),
               &alpha, w, t, int(cols), rounded, t, int(cols), &beta, y, CUDA_R_32F, int(rows), CUBLAS_COMPUTE_32F,
               CUBLAS_GEMM_DEFAULT);
}

}  // namespace

bool weight_type_supported(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_K:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q5_K:
    case DType::Q6_K: return true;
    default: return false;
  }
}

// The types whose rows meet int8 activations here; the others' rows are decoded to floats.
bool int8_path(DType t) {
  return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_K;
}

void matmul(Queue& q, DType type, const uint8_t* w, int64_t rows, int64_t cols, int64_t row_bytes, const float* x,
            int64_t n_tokens, float* y) {
  if (n_tokens == 0) return;
  const dim3 grid = matmul_grid(rows, n_tokens);
  const unsigned threads = 32 * kWarpsPerBlock;
  if (n_tokens >= kBlasMinTokens && type != DType::F32)
    return matmul_blas(q, type, w, rows, cols, row_bytes, x, n_tokens, y);
  if (wide_rows_fit(type, w, cols, row_bytes, x)) {
    const auto run = [&](auto rows_dot) {
      matmul_kernel<<<grid, threads, 0, stream_of(q)>>>(rows_dot, w, rows, row_bytes, n_tokens, y);
    };
    if (type == DType::F32) return run(WideFloatRows<DType::F32>{cols, x});
    if (type == DType::F16) return run(WideFloatRows<DType::F16>{cols, x});
    return run(WideFloatRows<DType::BF16>{cols, x});
  }
  if (!int8_path(type)) {
    matmul_kernel<<<grid, threads, 0, stream_of(q)>>>(FloatRows{type, cols, x}, w, rows, row_bytes, n_tokens, y);
    return;
  }
  const int block = type == DType::Q4_K ? 256 : 32;
  const int64_t n_blocks = n_tokens * cols / block;
  uint8_t* scratch = static_cast<uint8_t*>(q.scratch(n_tokens * cols + n_blocks * 4 + n_blocks * 8 * 4));
  if (!scratch) return;
  QuantizedActivations a{reinterpret_cast<int8_t*>(scratch), reinterpret_cast<float*>(scratch + n_tokens * cols),
                         reinterpret_cast<int32_t*>(scratch + n_tokens * cols + n_blocks * 4), cols, block};
  const int warps = 8;
  quantize_activations_kernel<<<unsigned((n_blocks + warps - 1) / warps), 32 * warps, 0, stream_of(q)>>>(x, n_blocks,
                                                                                                         a);
  matmul_kernel<<<grid, threads, 0, stream_of(q)>>>(QuantizedRows{type, a}, w, rows, row_bytes, n_tokens, y);
}

}  // namespace autoglm::cuda
