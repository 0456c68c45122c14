#include "model/device_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/check.h"
#include "kernels/cuda/cuda_api.h"

namespace autoglm {
namespace {

constexpr int64_t kPageBytes = 4096;

int64_t whole_pages(int64_t bytes) {
  return (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
}

}  // namespace

Result<DeviceMemory> DeviceMemory::allocate(const Device& device, int64_t bytes) {
  DeviceMemory m;
  m.device_ = device;
  m.bytes_ = bytes;
  if (bytes <= 0) return m;
  if (device.kind == DeviceKind::kCpu) {
    // Anonymous pages read as zero and are backed only when first touched: a KV pool of a GiB
    // costs nothing at start-up (zeroing it by hand took a second before the server was ready).
    void* p = mmap(nullptr, size_t(whole_pages(bytes)), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return resource_exhausted("cpu: cannot allocate " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
    m.data_ = static_cast<uint8_t*>(p);
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
    munmap(data_, size_t(whole_pages(bytes_)));
  else
    cuda::free(device_.index, data_);
  data_ = nullptr;
}

}  // namespace autoglm
