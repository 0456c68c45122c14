// The vision tower of a vision-language model as a projector GGUF describes it (llama.cpp's
// mmproj keys, clip.*): GLM-4.1V's (projector "glm4v") and Qwen2.5-VL's ("qwen2.5vl_merger").
// docs/vision-glm4v.md and docs/vision-qwen25vl.md hold the facts each switch follows.
#pragma once

#include <cstdint>
#include <string>

#include "autoglm/status.h"
#include "formats/gguf.h"
#include "media/image_preprocess.h"

namespace autoglm {

enum class ProjectorType {
  kGlm4v,     // learned position table, full attention, 2x2 conv downsample, gated merger
  kQwen25vl,  // window attention with full-attention layers, ln_q + two-layer merger
};
const char* projector_type_name(ProjectorType t);     // clip.projector_type: "glm4v", "qwen2.5vl_merger"
const char* projector_display_name(ProjectorType t);  // "GLM-4.1V", "Qwen2.5-VL"

struct VisionSpec {
  ProjectorType projector = ProjectorType::kQwen25vl;
  int64_t n_embd = 0;   // the blocks' width
  int64_t n_layer = 0;  // blocks
  int64_t n_head = 0;
  int64_t head_dim = 0;
  int64_t n_ff = 0;             // a block's gated FFN width
  int64_t n_out = 0;            // an image token's width: the text model's n_embd (projection_dim)
  int64_t n_merger_ff = 0;      // GLM: the merger's gated FFN width
  int64_t pos_grid = 0;         // GLM: the learned position table is pos_grid x pos_grid
  int64_t window_units = 0;     // Qwen: a window's side in merged units (window_size / patch / merge)
  int64_t full_every = 0;       // Qwen: layers il with (il + 1) % full_every == 0 see the whole image
  float eps = 1e-6f;            // the blocks' RMSNorm
  VisionPreprocess preprocess;  // patch, merge, pixel limits, mean and std

  int64_t merge() const { return preprocess.merge_size; }
  int64_t patch_cols() const {  // a pixel row of the patch embedding: C x temporal x patch x patch
    return 3 * int64_t(preprocess.temporal_patch_size) * preprocess.patch_size * preprocess.patch_size;
  }
  // Whether block il attends over the whole image (else within its window).
  bool full_attention(int64_t il) const { return window_units == 0 || (full_every > 0 && (il + 1) % full_every == 0); }
};

// Reads the clip.* keys; errors name the file and the key.
Result<VisionSpec> vision_spec_from_gguf(const GgufFile& file);

}  // namespace autoglm
