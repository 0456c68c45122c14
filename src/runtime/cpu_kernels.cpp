#include "autoglm/cpu_kernels.h"

#include "kernels/cpu/matmul.h"

namespace autoglm {

std::optional<CpuSwitch> cpu_switch_from_name(std::string_view name) {
  if (name == "auto") return CpuSwitch::kAuto;
  if (name == "on" || name == "1") return CpuSwitch::kOn;
  if (name == "off" || name == "0") return CpuSwitch::kOff;
  return std::nullopt;
}

std::optional<Bf16Mode> bf16_mode_from_name(std::string_view name) {
  return cpu_switch_from_name(name);
}

void set_cpu_bf16_activations(Bf16Mode mode) {
  switch (mode) {
    case Bf16Mode::kAuto: cpu::set_bf16_activations(cpu::Bf16Activations::kAuto); return;
    case Bf16Mode::kOn: cpu::set_bf16_activations(cpu::Bf16Activations::kOn); return;
    case Bf16Mode::kOff: cpu::set_bf16_activations(cpu::Bf16Activations::kOff); return;
  }
}

void set_cpu_lattice_gathers(CpuSwitch mode) {
  switch (mode) {
    case CpuSwitch::kAuto: cpu::set_lattice_gathers(cpu::LatticeGathers::kAuto); return;
    case CpuSwitch::kOn: cpu::set_lattice_gathers(cpu::LatticeGathers::kOn); return;
    case CpuSwitch::kOff: cpu::set_lattice_gathers(cpu::LatticeGathers::kOff); return;
  }
}

void set_cpu_lattice_permutes(CpuSwitch mode) {
  cpu::set_lattice_permutes(mode == CpuSwitch::kOff ? cpu::LatticePermutes::kOff : cpu::LatticePermutes::kAuto);
}

bool select_cpu_kernels(const std::string& name) {
  return cpu::select_kernel_isa(name.c_str());
}

std::string cpu_kernels() {
  return cpu::kernel_isa();
}

}  // namespace autoglm
