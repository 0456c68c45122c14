// LoRA adapters: low-rank deltas over a base model's matrices, y = W x + scale * B (A x),
// computed beside the base matmul (the base weights are never rewritten). Read from a PEFT
// folder (adapter_config.json + adapter_model.safetensors) or a GGUF adapter as llama.cpp
// writes it; every shape is checked against the base model and a mismatch names the tensor.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "model/lora_set.h"

namespace autoglm {

class Model;

// The matrices of a layer an adapter may change (a fused qkv or gate/up matrix is split
// into its parts).
enum class LoraTarget { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kLoraTargets = 7;

struct LoraDelta {
  int64_t rank = 0, n_in = 0, n_out = 0;
  std::vector<float> a;  // [rank, n_in], row-major
  std::vector<float> b;  // [n_out, rank], row-major
};

struct LoraAdapter {
  std::string path;
  float scale = 1;  // alpha / rank (alpha / sqrt(rank) with rsLoRA) times the scale asked for
  int64_t rank = 0;
  uint64_t id = 0;  // its content hashed: the prefix cache and its disk tier keep adapters' KV apart
  std::vector<std::array<std::optional<LoraDelta>, kLoraTargets>> layers;  // [n_layer]
  const LoraDelta* delta(int64_t layer, LoraTarget t) const {
    const auto& d = layers[size_t(layer)][size_t(t)];
    return d ? &*d : nullptr;
  }
  int64_t bytes() const;
};

// `path`: a PEFT folder or a GGUF adapter; `scale` multiplies the adapter's own.
Result<std::shared_ptr<const LoraAdapter>> load_lora(const std::string& path, const Model& base, float scale = 1.0f);

// The parts of base tensor `name` ("blk.3.attn_qkv.weight") an adapter may change: its layer,
// and per target the first row and the rows it covers. Empty for any other tensor.
struct LoraSlot {
  int64_t layer = 0;
  LoraTarget target = LoraTarget::kQ;
  int64_t row0 = 0, rows = 0;
};
std::vector<LoraSlot> lora_slots(const std::string& name, const Model& base);

// "PATH" or "PATH:SCALE" (the CLI's --lora), the scale 1 when absent.
Result<std::pair<std::string, float>> parse_lora_arg(const std::string& arg);

}  // namespace autoglm
