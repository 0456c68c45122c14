// A loaded vision tower: its projector GGUF (or a Hugging Face folder's tower read as one,
// hf_vision.h), its spec and its bound weights. The blocks' matrices are views of the file;
// the patch embedding and GLM's 2x2 downsample are rearranged into plain matrices at load.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "formats/gguf.h"
#include "kernels/cpu/packed.h"
#include "model/tensor_binder.h"
#include "model/vision_spec.h"

namespace autoglm {

struct VisionLayerWeights {
  Vec ln1, ln2;  // RMSNorm before attention and before the FFN
  cpu::WeightMatrix wq, wk, wv, wo;
  Vec bq, bk, bv, bo;  // empty where the file has none
  cpu::WeightMatrix gate, up, down;
  Vec b_gate, b_up, b_down;
};

struct VisionWeights {
  // [n_embd, patch_cols] over the processor's columns (channel, frame, row, column): both frames'
  // kernels side by side.
  cpu::WeightMatrix patch;
  Vec patch_bias;  // GLM (empty for Qwen)
  Vec norm_embd;   // GLM: RMSNorm after the patch embedding
  Vec pos_embd;    // GLM: [pos_grid * pos_grid, n_embd], the learned positions
  std::vector<VisionLayerWeights> layers;
  Vec post_ln;  // GLM: RMSNorm after the blocks; Qwen: the merger's ln_q
  // GLM's merger: the 2x2 downsample as one matrix over a merge block's 4 tokens side by side
  // [n_out, 4 * n_embd], then proj, LayerNorm, GELU and a gated FFN.
  cpu::WeightMatrix merge, fc, m_gate, m_up, m_down;
  Vec merge_bias, post_norm_w, post_norm_b;
  // Qwen's merger: mm0 over the 4 tokens side by side, GELU, mm2.
  cpu::WeightMatrix mm0, mm2;
  Vec mm0_b, mm2_b;
};

class VisionModel {
 public:
  // `path`: a projector GGUF (llama.cpp's mmproj) or a Hugging Face folder with a vision_config.
  // repack: the matrices interleaved for the packed kernels (a copy of them; false: the
  // per-row kernels read the file, as AUTOGLM_REPACK=0 does for the text model).
  static Result<std::unique_ptr<VisionModel>> load(const std::string& path, bool repack = true);
  static Result<std::unique_ptr<VisionModel>> from_gguf(std::unique_ptr<GgufFile> file, bool repack = true);

  const GgufFile& file() const { return *file_; }
  const VisionSpec& spec() const { return spec_; }
  const VisionWeights& weights() const { return weights_; }
  int64_t n_params() const;  // elements of all tensors
  int64_t repacked_bytes() const { return repacked_bytes_; }

 private:
  Status bind();
  Status bind_patch_embedding(const TensorBinder& b);
  Status bind_glm_merger(const TensorBinder& b);
  Status repack();
  // An owned float matrix [rows, cols].
  cpu::WeightMatrix own(std::vector<float> values, int64_t rows, int64_t cols);

  std::unique_ptr<GgufFile> file_;
  VisionSpec spec_;
  VisionWeights weights_;
  std::vector<std::vector<float>> owned_;
  cpu::PackedBuffer packed_;  // every packed matrix, one after another
  int64_t repacked_bytes_ = 0;
};

}  // namespace autoglm
