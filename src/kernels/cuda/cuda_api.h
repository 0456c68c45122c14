// The CUDA runtime as the rest of the engine sees it: plain C++ (no CUDA headers), so the
// CPU build compiles without a toolkit. A build without CUDA gets the stubs of
// cuda_api_none.cpp, which answer every call with kUnsupported naming the missing build option.
#pragma once

#include <cstdint>
#include <string>

#include "autoglm/status.h"

namespace autoglm::cuda {

// True in a build with the CUDA backend (-DAUTOGLM_CUDA=ON).
bool built();

struct DeviceInfo {
  int index = 0;
  std::string name;  // "NVIDIA H200"
  int compute_major = 0, compute_minor = 0;
  int multiprocessors = 0;
  int64_t total_bytes = 0, free_bytes = 0;
  double memory_bandwidth_gbs = 0;  // from the memory clock and bus width
};

// The GPUs the driver sees; an error when there is no driver or no device.
Result<int> device_count();
// One device's properties, or an error naming the index and how many devices there are.
Result<DeviceInfo> device_info(int index);

// Device memory, zeroed; an error names the device, the size and the free memory.
Result<void*> allocate_zeroed(int index, int64_t bytes);
void free(int index, void* p);
// Copies between host and device memory of device `index` (synchronous).
Status copy_to_device(int index, void* dst, const void* src, int64_t bytes);
Status copy_to_host(int index, void* dst, const void* src, int64_t bytes);
// True when p is device memory of device `index` (the backend checks the KV caches it is given).
bool is_device_pointer(int index, const void* p);

}  // namespace autoglm::cuda
