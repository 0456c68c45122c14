#include "model/device_memory.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/check.h"
#include "kernels/cuda/cuda_api.h"

namespace autoglm {
namespace {

constexpr int64_t kHostAlignment = 64;

}  // namespace

Result<DeviceMemory> DeviceMemory::allocate(const Device& device, int64_t bytes) {
  DeviceMemory m;
  m.device_ = device;
  m.bytes_ = bytes;
  if (bytes <= 0) return m;
  if (device.kind == DeviceKind::kCpu) {
    const int64_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    m.data_ = static_cast<uint8_t*>(std::aligned_alloc(kHostAlignment, size_t(rounded)));
    if (!m.data_) return resource_exhausted("cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    std::memset(m.data_, 0, size_t(bytes));
    return m;
  }
  AUTOGLM_ASSIGN_OR_RETURN(void* p, cuda::allocate_zeroed(device.index, bytes));
  m.data_ = static_cast<uint8_t*>(p);
  return m;
}

DeviceMemory DeviceMemory::allocate_or_die(const Device& device, int64_t bytes, const char* purpose) {
  auto m = allocate(device, bytes);
  if (!m) std::fprintf(stderr, "%s: %s\n", purpose, m.status().message().c_str());
  AUTOGLM_CHECK(m.is_ok());
  return std::move(m).value();
}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
  }
  return *this;
}

void DeviceMemory::release() {
  if (!data_) return;
  if (device_.kind == DeviceKind::kCpu)
    std::free(data_);
  else
    cuda::free(device_.index, data_);
  data_ = nullptr;
}

}  // namespace autoglm
