// Hugging Face architectures (config.json "architectures") as mappings onto the GGUF
// names and switches the one decoder reads: a new architecture is a table entry here.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace autoglm {

struct HfArchitecture {
  std::string hf_name;                                              // e.g. "LlamaForCausalLM"
  std::string gguf_arch;                                            // general.architecture it runs as
  std::string layer_prefix;                                         // tensors of layer N start with layer_prefix + "N."
  std::vector<std::pair<std::string, std::string>> global_tensors;  // HF name -> GGUF name
  std::vector<std::pair<std::string, std::string>> layer_tensors;   // HF suffix -> GGUF suffix
  bool permute_qk = false;            // q/k rows from rotate_half order to GGUF's adjacent pairs
  double rotary_fraction = 1.0;       // default partial_rotary_factor
  bool rope_base_from_ratio = false;  // RoPE base = 10000 * rope_ratio (ChatGLM)
};

// Null when the name is not supported.
const HfArchitecture* find_hf_architecture(const std::string& hf_name);
// The first architecture that runs as `gguf_arch` (its tensor names), or null.
const HfArchitecture* find_hf_architecture_for_gguf(const std::string& gguf_arch);
std::string supported_hf_architectures();  // "LlamaForCausalLM, ..."

}  // namespace autoglm
