// Hugging Face architectures (config.json "architectures") as mappings onto the GGUF
// names and switches the one decoder reads: a new architecture is a table entry here.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace autoglm {

// How a mixture-of-experts architecture stores its routed experts: one tensor per expert,
// layer_prefix + "N." + prefix + "E." + projection + ".weight", stacked into the 3-D GGUF
// tensors blk.N.ffn_{gate,up,down}_exps.weight (dims [n_embd, n_ff_exp, n_expert] for gate
// and up, [n_ff_exp, n_embd, n_expert] for down), as llama.cpp's converter does. Folders
// saved by transformers 5 may hold them already stacked: prefix + "gate_up_proj" ([gate; up]
// rows of each expert) and prefix + "down_proj".
struct HfExperts {
  std::string prefix;                                            // e.g. "mlp.experts."; empty: dense
  std::vector<std::pair<std::string, std::string>> projections;  // HF projection -> GGUF suffix
};

struct HfArchitecture {
  std::string hf_name;                                              // e.g. "LlamaForCausalLM"
  std::string gguf_arch;                                            // general.architecture it runs as
  std::string layer_prefix;                                         // tensors of layer N start with layer_prefix + "N."
  std::vector<std::pair<std::string, std::string>> global_tensors;  // HF name -> GGUF name
  std::vector<std::pair<std::string, std::string>> layer_tensors;   // HF suffix -> GGUF suffix
  bool permute_qk = false;            // q/k rows from rotate_half order to GGUF's adjacent pairs
  double rotary_fraction = 1.0;       // default partial_rotary_factor
  bool rope_base_from_ratio = false;  // RoPE base = 10000 * rope_ratio (ChatGLM)
  HfExperts experts;                  // routed experts, if any
  bool mla = false;                   // DeepSeek multi-head latent attention (kv_b_proj split into k_b, v_b)
  bool keep_nextn = false;            // NextN/MTP layers after num_hidden_layers are kept (GLM), else dropped
  int default_gating = 0;             // expert_gating_func when config.json names none (0: write none)
  // gpt-oss: experts stacked already, gate and up interleaved (rows 0::2 and 1::2), MXFP4
  // *_blocks/*_scales (or dense [experts, in, out] in dequantized folders), with biases.
  bool gpt_oss_experts = false;
  // A vision-language model (hf_vision.h reads its tower): config.json's text_config holds the
  // decoder's fields (older folders keep them at the top), its tensors may sit under
  // model.language_model. (transformers 4.52+), and rope_scaling.mrope_section becomes
  // rope.dimension_sections.
  bool vision_language = false;
  // GLM-4.1V: each head's rotated dims of q and k go from adjacent pairs to NeoX halves, the
  // order llama.cpp's M-RoPE (and its converter) uses.
  bool neox_rope_rows = false;
};

// The decoder's name of a vision-language checkpoint's text tensor (model.language_model.X ->
// model.X); "" for the vision tower's tensors. Other architectures' names pass unchanged.
std::string text_tensor_name(const HfArchitecture& arch, const std::string& name);

// Null when the name is not supported.
const HfArchitecture* find_hf_architecture(const std::string& hf_name);
// The first architecture that runs as `gguf_arch` (its tensor names), or null.
const HfArchitecture* find_hf_architecture_for_gguf(const std::string& gguf_arch);
std::string supported_hf_architectures();  // "LlamaForCausalLM, ..."

}  // namespace autoglm
