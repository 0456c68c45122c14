// autoglm convert: a Hugging Face folder written as a GGUF file other GGUF engines load:
// standard tensor names, Llama q/k rows in GGUF's RoPE order, 1-D tensors as F32, matrices
// in the chosen type, and the tokenizer (vocabulary, merges, special ids, pre-tokenizer
// name) and chat template carried into the tokenizer.* metadata.
#pragma once

#include <functional>
#include <string>

#include "autoglm/status.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"

namespace autoglm {

class Tokenizer;

struct ConvertReport {
  int64_t tensors = 0;
  int64_t bytes_out = 0;
};

// `type`: the type of every matrix (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, ...); a matrix
// whose rows are not whole blocks of it falls back to Q8_0 or F16. `on_tensor` (optional)
// is called after each tensor with (done, total).
Result<ConvertReport> convert_hf_folder(const std::string& dir, const std::string& out, DType type, ThreadPool& pool,
                                        const std::function<void(int64_t, int64_t)>& on_tensor = {});

// The vision tower of a vision-language folder (hf_vision.h) as the projector GGUF llama.cpp's
// `convert_hf_to_gguf.py --mmproj` writes: matrices in `type`, the conv kernels as they are,
// 1-D tensors as F32.
Result<ConvertReport> convert_hf_projector(const std::string& dir, const std::string& out, DType type, ThreadPool& pool,
                                           const std::function<void(int64_t, int64_t)>& on_tensor = {});

// The tokenizer.* keys (tokenizer.ggml.model/pre/tokens/token_type/merges/scores, special ids,
// add_bos/add_eos, chat_template) that describe `tok` in GGUF. A vocabulary shorter than the
// embedding's `embedding_rows` is padded, as llama.cpp's converter does, with UNUSED tokens
// "[PAD{i}]" (llama.cpp refuses a GGUF whose token count differs from the rows).
std::vector<std::pair<std::string, GgufValue>> tokenizer_metadata(const Tokenizer& tok, int64_t embedding_rows = 0);

}  // namespace autoglm
