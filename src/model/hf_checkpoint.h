// A Hugging Face model folder (config.json, *.safetensors, generation_config.json) read as
// an in-memory GGUF file: metadata keys and tensor names as llama.cpp's converter writes
// them, tensors viewing the memory-mapped safetensors data wherever the bytes can stay as
// they are. The rest is built into buffers the GgufFile owns: Llama q/k rows permuted into
// GGUF's RoPE order; Llama 3.1 RoPE scaling as a rope_freqs.weight tensor; mixture-of-experts
// per-expert matrices stacked into the 3-D blk.N.ffn_{gate,up,down}_exps tensors (a copy of
// every routed expert: most of an MoE model's bytes); DeepSeek's kv_b_proj split into
// attn_k_b/attn_v_b; gpt-oss's MXFP4 experts repacked into ggml's MXFP4 blocks. Model loading
// and `autoglm convert` both start here.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "formats/gguf.h"

namespace autoglm {

// A folder with config.json (as opposed to a GGUF file).
bool is_hf_folder(const std::string& path);

// Errors name the file and the field or tensor.
Result<std::unique_ptr<GgufFile>> open_hf_checkpoint(const std::string& dir);

struct HfArchitecture;
// The GGUF name of an HF tensor of `arch`, or "" if the decoder does not use it.
std::string gguf_name(const HfArchitecture& arch, const std::string& name);
// rotate_half pairs (i, i + d/2) of each head become adjacent rows (2i, 2i + 1): HF q/k rows
// in GGUF's order.
std::vector<uint8_t> permute_rows_for_rope(const uint8_t* data, int64_t rows, int64_t row_bytes, int64_t head_dim);

// generation_config.json: what applies when a request does not say. Absent file: all empty.
struct GenerationDefaults {
  std::optional<double> temperature, top_p, repetition_penalty;
  std::optional<int64_t> top_k;
  bool greedy = false;           // do_sample: false
  std::vector<int32_t> eos_ids;  // eos_token_id, one or a list
};
Result<GenerationDefaults> read_generation_config(const std::string& dir);

}  // namespace autoglm
