// The CUDA runtime calls of cuda_api.h and the Queue of cuda_ops.h.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "core/byte_size.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/cuda_ops.h"

namespace autoglm::cuda {
namespace {

Status cuda_error(const std::string& what, cudaError_t e) {
  return Status(e == cudaErrorMemoryAllocation ? StatusCode::kResourceExhausted : StatusCode::kInternal,
                what + ": " + cudaGetErrorString(e));
}

}  // namespace

bool built() {
  return true;
}

Result<int> device_count() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) return not_found("no CUDA device found");
  if (e != cudaSuccess) return unsupported(std::string("no usable CUDA driver: ") + cudaGetErrorString(e));
  return n;
}

Result<DeviceInfo> device_info(int index) {
  AUTOGLM_ASSIGN_OR_RETURN(const int n, device_count());
  if (index < 0 || index >= n)
    return not_found("cuda:" + std::to_string(index) + ": no such GPU (" + std::to_string(n) + " found)");
  cudaDeviceProp p{};
  if (cudaError_t e = cudaGetDeviceProperties(&p, index); e != cudaSuccess)
    return cuda_error("cuda:" + std::to_string(index), e);
  DeviceInfo info;
  info.index = index;
  info.name = p.name;
  info.compute_major = p.major;
  info.compute_minor = p.minor;
  info.multiprocessors = p.multiProcessorCount;
  info.total_bytes = int64_t(p.totalGlobalMem);
  int clock_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, index);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, index);
  info.memory_bandwidth_gbs = 2.0 * double(clock_khz) * 1e3 * double(bus_bits) / 8.0 / 1e9;  // double data rate
  size_t free_bytes = 0, total = 0;
  cudaSetDevice(index);
  if (cudaMemGetInfo(&free_bytes, &total) == cudaSuccess) info.free_bytes = int64_t(free_bytes);
  return info;
}

Result<void*> allocate_zeroed(int index, int64_t bytes) {
  if (cudaError_t e = cudaSetDevice(index); e != cudaSuccess) return cuda_error("cuda:" + std::to_string(index), e);
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, size_t(bytes)); e != cudaSuccess) {
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    return cuda_error("cuda:" + std::to_string(index) + ": cannot allocate " + format_bytes(double(bytes)) + " (" +
                          format_bytes(double(free_bytes)) + " free)",
                      e);
  }
  // cudaMemset runs on the legacy stream, which the queues' non-blocking streams do not wait
  // for: finish it here, or it may zero what a queue writes first.
  cudaError_t e = cudaMemset(p, 0, size_t(bytes));
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    cudaFree(p);
    return cuda_error("cuda:" + std::to_string(index) + ": memset", e);
  }
  return p;
}

void free(int index, void* p) {
  cudaSetDevice(index);
  cudaFree(p);
}

Status copy_to_device(int index, void* dst, const void* src, int64_t bytes) {
  cudaSetDevice(index);
  if (cudaError_t e = cudaMemcpy(dst, src, size_t(bytes), cudaMemcpyHostToDevice); e != cudaSuccess)
    return cuda_error("cuda:" + std::to_string(index) + ": copy to the device", e);
  return Status::ok();
}

Status copy_to_host(int index, void* dst, const void* src, int64_t bytes) {
  cudaSetDevice(index);
  if (cudaError_t e = cudaMemcpy(dst, src, size_t(bytes), cudaMemcpyDeviceToHost); e != cudaSuccess)
    return cuda_error("cuda:" + std::to_string(index) + ": copy to the host", e);
  return Status::ok();
}

bool is_device_pointer(int index, const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error of a host pointer
    return false;
  }
  return a.type == cudaMemoryTypeDevice && a.device == index;
}

Result<std::unique_ptr<Queue>> Queue::create(int device) {
  std::unique_ptr<Queue> q(new Queue(device));
  const std::string name = "cuda:" + std::to_string(device);
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return cuda_error(name, e);
  cudaStream_t stream = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess)
    return cuda_error(name + ": stream", e);
  q->stream_ = stream;
  cublasHandle_t blas = nullptr;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS)
    return Status(StatusCode::kInternal, name + ": cuBLAS did not start");
  cublasSetStream(blas, stream);
  q->blas_ = blas;
  return std::move(q);  // nvcc does not move a local into the Result implicitly
}

Queue::~Queue() {
  cudaSetDevice(device_);
  if (stream_) cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  if (blas_) cublasDestroy(static_cast<cublasHandle_t>(blas_));
  if (scratch_) cudaFree(scratch_);
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

Status Queue::make_current() {
  if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) return cuda_error("cuda:" + std::to_string(device_), e);
  return Status::ok();
}

Status Queue::upload(void* dst, const void* host_src, int64_t bytes) {
  if (cudaError_t e =
          cudaMemcpyAsync(dst, host_src, size_t(bytes), cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream_));
      e != cudaSuccess)
    return cuda_error("cuda:" + std::to_string(device_) + ": upload", e);
  return Status::ok();
}

Status Queue::download(void* host_dst, const void* src, int64_t bytes) {
  cudaMemcpyAsync(host_dst, src, size_t(bytes), cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream_));
  return finish();
}

Status Queue::finish() {
  const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  const cudaError_t launch = cudaGetLastError();
  if (!deferred_.is_ok()) return std::exchange(deferred_, Status::ok());
  if (e != cudaSuccess) return cuda_error("cuda:" + std::to_string(device_), e);
  if (launch != cudaSuccess) return cuda_error("cuda:" + std::to_string(device_) + ": a kernel launch", launch);
  return Status::ok();
}

void* Queue::scratch(int64_t bytes) {
  if (bytes <= scratch_bytes_) return scratch_;
  cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));  // the old scratch may be in use
  if (scratch_) cudaFree(scratch_);
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  if (cudaError_t e = cudaMalloc(&scratch_, size_t(bytes)); e != cudaSuccess) {
    static_cast<void>(deferred_ = cuda_error("cuda:" + std::to_string(device_) + ": matmul scratch", e));
    return nullptr;
  }
  scratch_bytes_ = bytes;
  return scratch_;
}

}  // namespace autoglm::cuda
