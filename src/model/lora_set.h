// The adapters one sequence runs with, for what names them without reading them (a batch, a
// request): lora.h defines LoraAdapter.
#pragma once

#include <memory>
#include <vector>

namespace autoglm {

struct LoraAdapter;

// The adapters one sequence runs with (usually one; several stack).
using LoraSet = std::vector<std::shared_ptr<const LoraAdapter>>;

}  // namespace autoglm
