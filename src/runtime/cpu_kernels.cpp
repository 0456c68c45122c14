#include "autoglm/cpu_kernels.h"

#include "kernels/cpu/matmul.h"

namespace autoglm {

std::optional<Bf16Mode> bf16_mode_from_name(std::string_view name) {
  if (name == "auto") return Bf16Mode::kAuto;
  if (name == "on" || name == "1") return Bf16Mode::kOn;
  if (name == "off" || name == "0") return Bf16Mode::kOff;
  return std::nullopt;
}

void set_cpu_bf16_activations(Bf16Mode mode) {
  switch (mode) {
    case Bf16Mode::kAuto: cpu::set_bf16_activations(cpu::Bf16Activations::kAuto); return;
    case Bf16Mode::kOn: cpu::set_bf16_activations(cpu::Bf16Activations::kOn); return;
    case Bf16Mode::kOff: cpu::set_bf16_activations(cpu::Bf16Activations::kOff); return;
  }
}

bool select_cpu_kernels(const std::string& name) {
  return cpu::select_kernel_isa(name.c_str());
}

std::string cpu_kernels() {
  return cpu::kernel_isa();
}

}  // namespace autoglm
