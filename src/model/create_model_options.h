// What create-model writes: the architecture, its preset shape, the weight type and seed.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace autoglm {

struct CreateModelOptions {
  // Dense: llama, qwen2, qwen3. Mixture of experts: qwen3moe, glm4moe, gpt-oss, deepseek2 (with
  // llama.cpp's keys and tensor names). Vision-language: glm4v, qwen25vl (a text GGUF and its
  // projector, create_vision_model.h).
  std::string arch = "llama";
  std::string preset = "tiny";  // dense: tiny, 150m, 1b; mixture of experts: tiny, 30b-a3b; vision: tiny, 9b
  // Type of every matrix and expert stack (a matrix whose rows are not whole blocks of it gets
  // Q8_0, F16 or F32; gpt-oss's experts get MXFP4 where the build has it); norms, biases and
  // the expert router stay F32.
  DType type = DType::F16;
  uint64_t seed = 1;
  int64_t n_vocab = 0;  // 0: the preset's (e.g. 151936 for a Qwen2-sized vocabulary)
  int64_t n_layer = 0;  // 0: the preset's
  int threads = 0;      // quantizing threads; 0: one per physical core (the bytes do not depend on it)
};

}  // namespace autoglm
