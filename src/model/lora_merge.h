// A base model with LoRA adapters merged into its weights, written as one GGUF file
// (`autoglm export-lora`): W + scale * B A for every matrix an adapter changes (summed in
// double), stored in the base tensor's own type or a chosen one; the rest copied as it is.
#pragma once

#include <optional>
#include <string>

#include "autoglm/status.h"
#include "core/dtype.h"
#include "model/lora.h"

namespace autoglm {

// `base` must have been loaded from a GGUF file (a folder has no tokenizer to carry over:
// convert it first). `type`: of the merged matrices (nullopt: each base tensor's own).
Status write_merged_model(const Model& base, const LoraSet& adapters, std::optional<DType> type,
                          const std::string& path);

}  // namespace autoglm
