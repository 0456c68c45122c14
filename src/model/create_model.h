// Deterministic random-weight models, so that benchmarks and demos need no download.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "core/dtype.h"
#include "model/create_model_options.h"

namespace autoglm {

// A model's shape. Widths are multiples of 256 where they can be, so that every K-quant applies.
struct ModelPreset {
  std::string name;
  int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx;
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;                  // mixture of experts (0: dense)
  int64_t q_lora = 0, kv_lora = 0, qk_rope = 0, qk_nope = 0, v_head = 0;  // deepseek2's MLA
};

const std::vector<std::string>& create_model_presets();  // of all architectures
const std::vector<std::string>& create_model_archs();

// The shape create_random_model writes for `options` (its preset, --n-layer and --vocab
// applied); errors name the architecture, preset or override. Text architectures only.
Result<ModelPreset> create_model_preset(const CreateModelOptions& options);

// Writes the model to `path` as GGUF v3 with a small built-in SPM vocabulary.
Status create_random_model(const CreateModelOptions& options, const std::string& path);

// A deterministic random LoRA adapter (GGUF, F32) of `rank` over every attention and MLP
// matrix of the model at `base_path`, for benchmarks and demos.
Status create_random_lora(const std::string& base_path, int64_t rank, float alpha, uint64_t seed,
                          const std::string& path);

}  // namespace autoglm
