// A loaded model: the mapped GGUF file, its decoder description and bound weights.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "formats/gguf.h"
#include "kernels/cpu/packed.h"
#include "model/model_spec.h"
#include "model/weights.h"

namespace autoglm {

class Model {
 public:
  // arch_override: run the file as another supported architecture (see spec_from_gguf).
  static Result<std::unique_ptr<Model>> load(const std::string& path, const std::string& arch_override = "");
  // Takes an already parsed file (tests parse corrupted images from memory).
  static Result<std::unique_ptr<Model>> from_gguf(std::unique_ptr<GgufFile> file,
                                                  const std::string& arch_override = "");

  const GgufFile& file() const { return *file_; }
  const ModelSpec& spec() const { return spec_; }
  const ModelWeights& weights() const { return weights_; }

  int64_t n_params() const;                 // elements of all tensors
  int64_t weight_bytes() const;             // bytes of all tensors
  std::string weight_type_summary() const;  // e.g. "Q4_0 x 155, F32 x 45"

 private:
  // Interleaves the matrices the integer kernels read packed (AUTOGLM_REPACK=0 skips it).
  Status repack_weights();

  std::unique_ptr<GgufFile> file_;
  ModelSpec spec_;
  ModelWeights weights_;
  std::vector<cpu::PackedBuffer> packed_;
};

}  // namespace autoglm
