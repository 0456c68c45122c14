// A loaded model: the mapped GGUF file (or a Hugging Face folder read as one), its decoder
// description and bound weights.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "core/device.h"
#include "formats/gguf.h"
#include "kernels/cpu/packed.h"
#include "model/backend.h"
#include "model/hf_checkpoint.h"
#include "model/model_spec.h"
#include "model/weights.h"

namespace autoglm {

class Tokenizer;

// Progress of a long load step ("quantizing to q8_0", "repacking weights"): done of total.
using LoadProgress = std::function<void(const std::string& step, int64_t done, int64_t total)>;

struct ModelLoadOptions {
  std::string arch_override;      // run the file as another supported architecture (see spec_from_gguf)
  std::optional<DType> quantize;  // re-encode the matrices at load (a BF16 folder at Q8_0 speed)
  bool repack = true;             // false: keep the file's layout (the per-row kernels run)
  LoadProgress progress;          // null: silent
  Device device;                  // where the forward pass runs (the weights are placed there)
  FileLoad file_load;             // --no-mmap / --mlock (GGUF files; folders are always mapped)
  // --check-tensors: decode every weight at load; a block with a NaN or infinite value (a corrupt
  // scale) is an error naming the tensor, row and block.
  bool check_tensors = false;
  // --n-cpu-moe N: on a GPU, the routed experts of layers [0, N) stay in host memory and run
  // on the CPU (kCpuMoeAllLayers: --cpu-moe, every layer); 0: all on the GPU. The CPU
  // device ignores it. Negative: an error.
  int64_t n_cpu_moe = 0;
};

class Model {
 public:
  // `path`: a GGUF file or a Hugging Face folder (config.json + safetensors).
  static Result<std::unique_ptr<Model>> load(const std::string& path, const ModelLoadOptions& options = {});
  static Result<std::unique_ptr<Model>> load(const std::string& path, const std::string& arch_override) {
    ModelLoadOptions options;
    options.arch_override = arch_override;
    return load(path, options);
  }
  // Takes an already parsed file (tests parse corrupted images from memory).
  static Result<std::unique_ptr<Model>> from_gguf(std::unique_ptr<GgufFile> file, const ModelLoadOptions& options = {});

  // The tokenizer that belongs to the model: tokenizer.json for a folder (with
  // generation_config.json's end-of-generation ids), the GGUF metadata otherwise.
  Result<std::unique_ptr<Tokenizer>> load_tokenizer() const;
  // generation_config.json of a folder; empty for GGUF files.
  const GenerationDefaults& generation_defaults() const { return generation_defaults_; }
  const std::string& source_path() const { return source_path_; }

  const GgufFile& file() const { return *file_; }
  const ModelSpec& spec() const { return spec_; }
  const ModelWeights& weights() const { return weights_; }
  const Device& device() const { return device_; }
  // The weights' copies on the device (null for the CPU).
  const PlacedWeights* placed_weights() const { return placed_.get(); }

  int64_t n_params() const;  // elements of all tensors
  // Bytes copied at load into the interleaved layouts (the rest is read where the file is mapped).
  int64_t repacked_bytes() const { return repacked_bytes_; }
  int64_t weight_bytes() const;             // bytes of all tensors
  std::string weight_type_summary() const;  // e.g. "Q4_0 x 155, F32 x 45"
  // The type of the layers' matrices (the first FFN down projection's): what decode streams.
  DType layer_weight_type() const { return weights_.layers.front().down.type; }

 private:
  // Interleaves the matrices the integer kernels read packed (AUTOGLM_REPACK=0 skips it).
  // host_experts not null (a GPU's model): only the routed experts of the layers it marks,
  // which the CPU runs there (--cpu-moe).
  Status repack_weights(const LoadProgress& progress, const std::vector<bool>* host_experts = nullptr);

  std::unique_ptr<GgufFile> file_;
  std::string source_path_;
  GenerationDefaults generation_defaults_;
  ModelSpec spec_;
  ModelWeights weights_;
  cpu::PackedBuffer packed_;  // every packed matrix, one after another
  int64_t repacked_bytes_ = 0;
  Device device_;
  std::unique_ptr<PlacedWeights> placed_;
};

}  // namespace autoglm
