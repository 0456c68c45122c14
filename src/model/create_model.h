// Deterministic random-weight models, so that benchmarks and demos need no download.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "core/dtype.h"

namespace autoglm {

struct CreateModelOptions {
  // Dense: llama, qwen2, qwen3. Mixture of experts: qwen3moe, glm4moe, gpt-oss, deepseek2 (with
  // llama.cpp's keys and tensor names).
  std::string arch = "llama";
  std::string preset = "tiny";  // dense: tiny, 150m, 1b; mixture of experts: tiny, 30b-a3b
  // Type of every matrix and expert stack (a matrix whose rows are not whole blocks of it gets
  // Q8_0, F16 or F32; gpt-oss's experts get MXFP4 where the build has it); norms, biases and
  // the expert router stay F32.
  DType type = DType::F16;
  uint64_t seed = 1;
  int64_t n_vocab = 0;  // 0: the preset's (e.g. 151936 for a Qwen2-sized vocabulary)
  int64_t n_layer = 0;  // 0: the preset's
  int threads = 0;      // quantizing threads; 0: one per physical core (the bytes do not depend on it)
};

const std::vector<std::string>& create_model_presets();  // of all architectures
const std::vector<std::string>& create_model_archs();

// Writes the model to `path` as GGUF v3 with a small built-in SPM vocabulary.
Status create_random_model(const CreateModelOptions& options, const std::string& path);

// A deterministic random LoRA adapter (GGUF, F32) of `rank` over every attention and MLP
// matrix of the model at `base_path`, for benchmarks and demos.
Status create_random_lora(const std::string& base_path, int64_t rank, float alpha, uint64_t seed,
                          const std::string& path);

}  // namespace autoglm
