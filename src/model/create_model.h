// Deterministic random-weight models, so that benchmarks and demos need no download.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "core/dtype.h"
#include "model/create_model_options.h"

namespace autoglm {

const std::vector<std::string>& create_model_presets();  // of all architectures
const std::vector<std::string>& create_model_archs();

// Writes the model to `path` as GGUF v3 with a small built-in SPM vocabulary.
Status create_random_model(const CreateModelOptions& options, const std::string& path);

// A deterministic random LoRA adapter (GGUF, F32) of `rank` over every attention and MLP
// matrix of the model at `base_path`, for benchmarks and demos.
Status create_random_lora(const std::string& base_path, int64_t rank, float alpha, uint64_t seed,
                          const std::string& path);

}  // namespace autoglm
