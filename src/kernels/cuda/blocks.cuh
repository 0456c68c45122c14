// Device-side reading of the GGUF block formats (the semantics of kernels/ref/block_decode.h)
// and the block reductions the kernels share.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "core/dtype.h"

namespace autoglm::cuda {

// The file's fp16 scales sit at 2-byte offsets in blocks of odd sizes: read them bytewise.
__device__ inline float load_half(const uint8_t* p) {
  return __half2float(__ushort_as_half(uint16_t(p[0] | (p[1] << 8))));
}

__device__ inline void k_scale_min(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Element i of an encoded row of a supported weight type (or KV type).
__device__ inline float decode_element(DType type, const uint8_t* row, int64_t i) {
  switch (type) {
    case DType::F32: return reinterpret_cast<const float*>(row)[i];
    case DType::F16: return __half2float(reinterpret_cast<const __half*>(row)[i]);
    case DType::BF16: return __uint_as_float(uint32_t(reinterpret_cast<const uint16_t*>(row)[i]) << 16);
    case DType::Q8_0: {
      const uint8_t* b = row + (i / 32) * 34;
      return float(reinterpret_cast<const int8_t*>(b + 2)[i % 32]) * load_half(b);
    }
    case DType::Q4_0: {
      const uint8_t* b = row + (i / 32) * 18;
      const int j = int(i % 32);
      const uint8_t byte = b[2 + j % 16];
      return float((j < 16 ? byte & 0x0f : byte >> 4) - 8) * load_half(b);
    }
    case DType::Q4_1: {
      const uint8_t* b = row + (i / 32) * 20;
      const int j = int(i % 32);
      const uint8_t byte = b[4 + j % 16];
      return float(j < 16 ? byte & 0x0f : byte >> 4) * load_half(b) + load_half(b + 2);
    }
    case DType::Q5_0:
    case DType::Q5_1: {
      const bool offset = type == DType::Q5_1;  // Q5_1: d, m; Q5_0: d and codes centred on 16
      const uint8_t* b = row + (i / 32) * (offset ? 24 : 22);
      const int j = int(i % 32);
      const uint8_t* qh = b + (offset ? 4 : 2);
      const uint32_t high = uint32_t(qh[0]) | uint32_t(qh[1]) << 8 | uint32_t(qh[2]) << 16 | uint32_t(qh[3]) << 24;
      const uint8_t byte = qh[4 + j % 16];
      const int q = (j < 16 ? byte & 0x0f : byte >> 4) | int((high >> j) & 1) << 4;
      return offset ? float(q) * load_half(b) + load_half(b + 2) : float(q - 16) * load_half(b);
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      const bool five = type == DType::Q5_K;  // Q5_K: 32 bytes of high bits before the nibbles
      const uint8_t* b = row + (i / 256) * (five ? 176 : 144);
      const int j = int(i % 256), group = j / 64, within = j % 64, sub = 2 * group + (within >= 32);
      int sc, m;
      k_scale_min(sub, b + 4, sc, m);
      const uint8_t byte = b[(five ? 48 : 16) + 32 * group + within % 32];
      int q = within < 32 ? byte & 0x0f : byte >> 4;
      if (five) q += (b[16 + within % 32] >> sub) & 1 ? 16 : 0;
      const float d = load_half(b) * float(sc), dm = load_half(b + 2) * float(m);
      return d * float(q) - dm;
    }
    case DType::Q6_K: {
      const uint8_t* b = row + (i / 256) * 210;
      const int j = int(i % 256), half = j / 128, quarter = (j % 128) / 32, l = j % 32;
      const uint8_t* ql = b + 64 * half;
      const uint8_t* qh = b + 128 + 32 * half;
      const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * half;
      const uint8_t low = ql[l + 32 * (quarter % 2)];
      const int q = int((quarter < 2 ? low & 0x0f : low >> 4) | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
      return load_half(b + 208) * float(sc[l / 16 + 2 * quarter]) * float(q);
    }
    default: return 0.0f;
  }
}

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}

__device__ inline double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  return v;
}

// Sum (or max) over the block (blockDim.x a multiple of 32, at most 1024); every thread gets
// it. `shared` holds 32 values; the whole block must make the call. `identity`: 0 or -inf.
template <class T, class Op>
__device__ inline T block_reduce(T v, T* shared, Op warp_op, T identity) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
  v = warp_op(v);
  __syncthreads();  // shared may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  return warp_op(lane < n_warps ? shared[lane] : identity);
}

template <class T>
__device__ inline T block_sum(T v, T* shared) {
  return block_reduce(
      v, shared, [](T x) { return warp_sum(x); }, T(0));
}

__device__ inline float block_max(float v, float* shared) {
  return block_reduce(
      v, shared, [](float x) { return warp_max(x); }, -INFINITY);
}

}  // namespace autoglm::cuda
