// A block of memory on a device, owned: host memory (page-aligned anonymous pages) for the CPU, device
// memory for a CUDA GPU (CUDA builds). Zeroed when allocated. KV caches and the forward
// pass's activations live in it, so the ops of the device's backend can read them.
#pragma once

#include <cstdint>

#include "autoglm/status.h"
#include "core/device.h"

namespace autoglm {

class DeviceMemory {
 public:
  DeviceMemory() = default;
  // An error names the device and the size (no CUDA in this build, out of device memory).
  static Result<DeviceMemory> allocate(const Device& device, int64_t bytes);
  // allocate, or a fatal error naming what failed (for constructors that cannot return one).
  static DeviceMemory allocate_or_die(const Device& device, int64_t bytes, const char* purpose);
  DeviceMemory(DeviceMemory&& other) noexcept { *this = std::move(other); }
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() { release(); }

  uint8_t* data() const { return data_; }
  float* floats() const { return reinterpret_cast<float*>(data_); }
  int64_t bytes() const { return bytes_; }
  const Device& device() const { return device_; }

 private:
  void release();

  uint8_t* data_ = nullptr;
  int64_t bytes_ = 0;
  Device device_;
};

}  // namespace autoglm
