// The CPU kernels' process-wide switches: which kernel set runs (the CLI's AUTOGLM_CPU_ISA), how
// BF16 weights see their activations (--bf16-activations, AUTOGLM_BF16_ACTIVATIONS) and how the
// lattice types fetch their grid entries (AUTOGLM_LATTICE_GATHERS, AUTOGLM_LATTICE_PERMUTES).
// None is to be changed while a model runs.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace autoglm {

// BF16 weights: the activations rounded to BF16 (on: CPUs with AVX512-BF16 multiply pairs of
// them in hardware), kept as floats (off), or rounded where the kernel set in use has those
// instructions (auto, the default).
enum class CpuSwitch { kAuto, kOn, kOff };
using Bf16Mode = CpuSwitch;

// "auto", "on" (or "1"), "off" (or "0"); nullopt for anything else.
std::optional<CpuSwitch> cpu_switch_from_name(std::string_view name);
std::optional<Bf16Mode> bf16_mode_from_name(std::string_view name);
void set_cpu_bf16_activations(Bf16Mode mode);

// The IQ1/IQ2/IQ3 types' decode kernels: grid entries by gathers (on), by scalar loads (off), or by
// gathers where the CPU's are fast (auto, the default: Intel cores without the GDS microcode
// mitigation). The results are the same bits either way.
void set_cpu_lattice_gathers(CpuSwitch mode);
// IQ2_XXS's and IQ3_XXS's decode kernels on the AVX-512 set: grid entries by byte permutes, with
// no loads (auto or on, the default: where the CPU has AVX512-VBMI and GFNI; on cannot add them),
// or as the gathers switch says (off). The same bits either way.
void set_cpu_lattice_permutes(CpuSwitch mode);

// Switches to the CPU kernel set `name` ("avx512vnni", "avxvnni", "avx2", "generic"); false
// when the name is unknown or this CPU cannot run it.
bool select_cpu_kernels(const std::string& name);
// The kernel set in use.
std::string cpu_kernels();

}  // namespace autoglm
