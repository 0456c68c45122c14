// Re-quantizing a GGUF model: every matrix to one weight type, the embedding table and the
// output projection kept at a higher one, everything else (norms, biases, metadata) copied.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "autoglm/status.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "formats/imatrix_file.h"
#include "model/quant_mix.h"

namespace autoglm {

struct QuantizeOptions {
  DType type = DType::Q4_0;
  std::optional<DType> keep_type = DType::Q8_0;  // token_embd/output; nullopt: same as `type`
  bool vectors_to_f32 = false;  // 1-D tensors (norms, biases), routers and other non-.weight tensors stored as F32
  // llama-quantize's named mix: each tensor's type by its rules (type and keep_type unused).
  std::optional<QuantMix> mix;
  // Without a mix (--pure), the mix TYPE names if it names one: llama-quantize's file type, which
  // decides whether a tensor needs an importance matrix (--pure Q2_K_S: Q2_K that does).
  std::optional<QuantMix> named_mix;
  // The mix's choices; its output and token-embedding types and leave_output apply without a mix too.
  MixChoices mix_choices;
  // Weighs each re-encoded value's error by its column's importance; named in the metadata.
  std::shared_ptr<const Imatrix> imatrix;
  std::string imatrix_path;
};

struct QuantizeReport {
  int64_t tensors_quantized = 0, tensors_copied = 0, tensors_fallback = 0;  // fallback: rows not whole blocks
  int64_t bytes_in = 0, bytes_out = 0;
  std::map<DType, int64_t> types;  // of the matrices quantized
};

class GgufFile;
struct GgufValue;

// The model of `in` with its matrices re-encoded, in memory (load-time quantization); the
// result keeps its own tensor storage and refers to `in` for nothing.
Result<std::unique_ptr<GgufFile>> quantize_file(const GgufFile& in, const QuantizeOptions& options, ThreadPool& pool,
                                                const std::function<void(int64_t, int64_t)>& on_tensor = {},
                                                QuantizeReport* report = nullptr);

// Writes the model of `in`, its matrices re-encoded, to `out` one tensor at a time (peak memory:
// one tensor); `extra_metadata` is added to (or replaces) the file's keys.
Status quantize_to_file(const GgufFile& in, const std::string& out, const QuantizeOptions& options, ThreadPool& pool,
                        const std::vector<std::pair<std::string, GgufValue>>& extra_metadata,
                        const std::function<void(int64_t, int64_t)>& on_tensor = {}, QuantizeReport* report = nullptr);

// Reads `in`, writes `out`. Matrices in any supported type are decoded and re-encoded, row by row
// on the pool's threads; a matrix whose rows are not whole blocks of `type` falls back to Q8_0 or
// F16. `on_tensor` (optional) is called after each tensor with (done, total).
Result<QuantizeReport> quantize_gguf(const std::string& in, const std::string& out, const QuantizeOptions& options,
                                     ThreadPool& pool, const std::function<void(int64_t, int64_t)>& on_tensor = {});

}  // namespace autoglm
