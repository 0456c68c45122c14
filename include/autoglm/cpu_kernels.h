// The CPU kernels' process-wide switches: which kernel set runs (the CLI's AUTOGLM_CPU_ISA)
// and how BF16 weights see their activations (--bf16-activations, AUTOGLM_BF16_ACTIVATIONS).
// Neither is to be changed while a model runs.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace autoglm {

// BF16 weights: the activations rounded to BF16 (on: CPUs with AVX512-BF16 multiply pairs of
// them in hardware), kept as floats (off), or rounded where the kernel set in use has those
// instructions (auto, the default).
enum class Bf16Mode { kAuto, kOn, kOff };

// "auto", "on" (or "1"), "off" (or "0"); nullopt for anything else.
std::optional<Bf16Mode> bf16_mode_from_name(std::string_view name);
void set_cpu_bf16_activations(Bf16Mode mode);

// Switches to the CPU kernel set `name` ("avx512vnni", "avxvnni", "avx2", "generic"); false
// when the name is unknown or this CPU cannot run it.
bool select_cpu_kernels(const std::string& name);
// The kernel set in use.
std::string cpu_kernels();

}  // namespace autoglm
