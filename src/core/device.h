// Where the forward pass runs: the CPU, or one CUDA GPU ("cuda:N"). The name is what
// --device, the config's `device:` and Python's device= accept.
#pragma once

#include <string>
#include <string_view>

#include "autoglm/status.h"

namespace autoglm {

enum class DeviceKind { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;  // the CUDA ordinal
  bool operator==(const Device&) const = default;
};

// "cpu", "cuda" (= cuda:0) or "cuda:N"; an error names the text and the accepted forms.
Result<Device> parse_device(std::string_view text);
// "cpu" or "cuda:N".
std::string device_name(const Device& device);

}  // namespace autoglm
