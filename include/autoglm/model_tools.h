// Tools that write model files rather than run them (the CLI's convert, quantize,
// create-model and export-lora): a Hugging Face folder converted to GGUF, a GGUF model
// re-quantized, a deterministic random-weight model or LoRA adapter, and a model with LoRA
// adapters merged into its weights. Weight types are named as GGUF names them ("f32", "f16",
// "bf16", "q8_0", "q4_0", "q4_k", "q6_k", ...; any case). Errors name the file, tensor or
// option that was wrong.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autoglm/runtime.h"
#include "autoglm/status.h"

namespace autoglm {

// The weight type called `name` (any case), as its canonical name ("Q8_0", "F16", ...); an
// error "'x' is not a weight type" otherwise (a caller may put its flag's name around it).
Result<std::string> weight_type_name(std::string_view name);

// "PATH" or "PATH:SCALE" (the CLI's --lora), the scale 1 when absent; an error names the argument.
Result<LoraOption> parse_lora_option(const std::string& arg);

// A token of a text and its piece (control tokens written as their text).
struct TokenPiece {
  int32_t id = 0;
  std::string piece;
};

// `text` split into tokens by the vocabulary of the GGUF file `path` alone (a model, or a
// vocabulary-only file such as llama.cpp's ggml-vocab-*.gguf, of any architecture: no weights
// are loaded). `add_special`: BOS/EOS as the vocabulary wants them; `parse_special`: control
// tokens written in the text are recognised.
Result<std::vector<TokenPiece>> tokenize_with_vocabulary(const std::string& path, const std::string& text,
                                                         bool add_special = true, bool parse_special = false);

// Called after each tensor written: (done, total).
using ToolProgress = std::function<void(int64_t, int64_t)>;

struct ConvertModelOptions {
  // The type of every matrix; a matrix whose rows are not whole blocks of it falls back to
  // Q8_0 or F16. Norms and other 1-D tensors are F32.
  std::string type = "f16";
  int threads = 0;  // 0: one per physical core
  ToolProgress progress;
  // A vision-language folder's projector (its vision tower, llama.cpp's mmproj layout) goes
  // here; "": beside `out` as X.mmproj.gguf for X.gguf.
  std::string mmproj_out;
};

struct ConvertModelReport {
  int64_t tensors = 0;
  int64_t bytes_out = 0;
  std::string mmproj_path;  // "" when the folder has no vision tower
  int64_t mmproj_tensors = 0, mmproj_bytes = 0;
};

// Writes the Hugging Face folder `folder` (config.json, *.safetensors, tokenizer.json) as the
// GGUF file `out`, with its tokenizer and chat template in the tokenizer.* metadata; a
// vision-language folder's vision tower as a projector GGUF too (mmproj_out).
Result<ConvertModelReport> convert_hf_model(const std::string& folder, const std::string& out,
                                            const ConvertModelOptions& options = {});

// Whether `name` (any case) is one of llama-quantize's mixes that quantize_model knows.
bool is_quantize_mix(std::string_view name);

struct QuantizeModelOptions {
  // A llama-quantize mix ("Q4_K_M", "Q3_K_S", "Q2_K", "IQ4_XS", "Q8_0", ...; Q4_K is Q4_K_M): each
  // tensor gets the type llama.cpp's rules give it, the file the size llama.cpp's has. With
  // `pure`, or a type that names no mix ("mxfp4"): that type for every matrix.
  std::string type = "q4_0";
  bool pure = false;
  // The embedding table and output projection (llama-quantize's --token-embedding-type and
  // --output-tensor-type); keep_type: both. nullopt: as the mix (pure: as `type`).
  std::optional<std::string> keep_type, output_tensor_type, token_embedding_type;
  bool leave_output_tensor = false;  // output.weight copied as it is
  // An importance matrix (llama.cpp's imatrix GGUF or .dat, e.g. from compute_imatrix): each
  // matrix's values weighted by their columns' mean squared activation; the IQ2/IQ1 mixes need one.
  std::string imatrix;
  bool vectors_to_f32 = false;  // 1-D tensors, routers and other non-.weight tensors as F32
  int threads = 0;              // 0: one per physical core
  ToolProgress progress;
};

struct QuantizeModelReport {
  int64_t tensors_quantized = 0, tensors_copied = 0, tensors_fallback = 0;  // fallback: rows not whole blocks
  int64_t bytes_in = 0, bytes_out = 0;
  std::string mix;                                     // the mix's name; "" for one type
  std::vector<std::pair<std::string, int64_t>> types;  // the quantized tensors' types and counts
};

// Reads the GGUF model `in` and writes it to `out` with its matrices re-encoded (the embedding
// table and output projection at keep_type), everything else copied.
Result<QuantizeModelReport> quantize_model(const std::string& in, const std::string& out,
                                           const QuantizeModelOptions& options = {});

// llama-imatrix's statistics: every matrix of the blocks (and the output projection when
// asked) sees, per input column, the sum of its squared inputs over the text, per expert for
// the experts; written in llama.cpp's imatrix GGUF format, which `quantize --imatrix` (ours
// and llama-quantize) reads. The text is cut into chunks as llama-perplexity cuts it (the
// first token of each replaced by BOS), every token counted.
struct ImatrixOptions {
  int64_t n_ctx = 512;          // tokens per chunk (-c)
  int64_t max_chunks = -1;      // -1: every whole chunk (--chunks)
  bool process_output = false;  // also output.weight (--process-output)
  int64_t save_every = 10;      // chunks between writes of the output (--output-frequency); 0: at the end only
  std::string dataset;          // recorded in imatrix.datasets (the text file's name)
  int threads = 0;              // 0: one per physical core
  // After each chunk: chunks done, of, the running perplexity of the scored half, seconds so far.
  std::function<void(int64_t, int64_t, double, double)> on_chunk;
};

struct ImatrixReport {
  int64_t n_chunk = 0, entries = 0;
  double ppl = 0;
};

Result<ImatrixReport> compute_imatrix(const std::string& model_path, const std::string& text, const std::string& out,
                                      const ImatrixOptions& options = {});

struct RandomModelOptions {
  // Dense: llama, qwen2, qwen3. Mixture of experts: qwen3moe, glm4moe, gpt-oss, deepseek2.
  // Vision-language: glm4v, qwen25vl (the model and its projector, projector_path_for(path)).
  std::string arch = "llama";
  std::string preset = "tiny";  // dense: tiny, 150m, 1b; mixture of experts: tiny, 30b-a3b; vision: tiny, 9b
  std::string type = "f16";     // of every matrix and expert stack (norms, biases, routers: F32)
  uint64_t seed = 1;
  int64_t n_vocab = 0;  // 0: the preset's
  int64_t n_layer = 0;  // 0: the preset's
  int threads = 0;      // quantizing threads; 0: one per physical core (the bytes do not depend on it)
};

// The architectures and presets (of all architectures) write_random_model knows.
const std::vector<std::string>& random_model_archs();
const std::vector<std::string>& random_model_presets();

// Writes a deterministic random-weight model to `path` as GGUF v3 with a small built-in vocabulary.
Status write_random_model(const RandomModelOptions& options, const std::string& path);

// Where a vision-language model's projector lies beside it, and where `convert` and
// write_random_model put it: X.mmproj.gguf for X.gguf.
std::string projector_path_for(const std::string& model_path);

// Writes a deterministic random LoRA adapter (GGUF, F32) of `rank` over every attention and MLP
// matrix of the model at `base_path`.
Status write_random_lora(const std::string& base_path, int64_t rank, float alpha, uint64_t seed,
                         const std::string& path);

// Writes the GGUF model `base_path` with `adapters` merged into its weights (W + scale * B A)
// to `path`; `type`: of the merged matrices ("": each base tensor's own).
Status merge_lora_model(const std::string& base_path, const std::vector<LoraOption>& adapters, const std::string& type,
                        const std::string& path);

}  // namespace autoglm
