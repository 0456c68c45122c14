// Deterministic random-weight models, so that benchmarks and demos need no download.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "core/dtype.h"

namespace autoglm {

struct CreateModelOptions {
  std::string arch = "llama";   // llama, qwen2, qwen3
  std::string preset = "tiny";  // tiny, 150m, 1b
  DType type = DType::F16;      // type of every 2-D weight; norms stay F32
  uint64_t seed = 1;
  int64_t n_vocab = 0;  // 0: the preset's (e.g. 151936 for a Qwen2-sized vocabulary)
};

const std::vector<std::string>& create_model_presets();

// Writes the model to `path` as GGUF v3 with a small built-in SPM vocabulary.
Status create_random_model(const CreateModelOptions& options, const std::string& path);

// A deterministic random LoRA adapter (GGUF, F32) of `rank` over every attention and MLP
// matrix of the model at `base_path`, for benchmarks and demos.
Status create_random_lora(const std::string& base_path, int64_t rank, float alpha, uint64_t seed,
                          const std::string& path);

}  // namespace autoglm
