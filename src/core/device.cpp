#include "core/device.h"

#include <charconv>

namespace autoglm {

Result<Device> parse_device(std::string_view text) {
  const auto bad = [&] {
    return invalid_argument("device: '" + std::string(text) + "' is not a device (cpu, cuda or cuda:N)");
  };
  if (text == "cpu") return Device{};
  if (text == "cuda") return Device{DeviceKind::kCuda, 0};
  constexpr std::string_view kCudaPrefix = "cuda:";
  if (!text.starts_with(kCudaPrefix)) return bad();
  const std::string_view digits = text.substr(kCudaPrefix.size());
  int index = -1;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || index < 0) return bad();
  return Device{DeviceKind::kCuda, index};
}

std::string device_name(const Device& device) {
  return device.kind == DeviceKind::kCpu ? "cpu" : "cuda:" + std::to_string(device.index);
}

}  // namespace autoglm
