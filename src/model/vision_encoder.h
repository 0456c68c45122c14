// A vision tower's forward pass over one image's patches (media/image_preprocess.h), on the CPU
// kernels and thread pool the text model uses: the patch embedding, the 2-D rotary blocks (full
// attention, or Qwen2.5-VL's windows), and the merger that turns each 2x2 block of patches into
// one token of the text model's width. Read it beside docs/vision-glm4v.md and
// docs/vision-qwen25vl.md.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "autoglm/status.h"
#include "core/thread_pool.h"
#include "media/image_preprocess.h"
#include "model/vision_model.h"

namespace autoglm {

// One image's tokens for the text model: rows x cols (the merged grid, raster order) rows of
// width floats.
struct ImageEmbedding {
  std::vector<float> values;
  int32_t rows = 0, cols = 0;
  int64_t width = 0;
  int64_t n_tokens() const { return int64_t(rows) * cols; }
  const float* token(int64_t i) const { return values.data() + i * width; }
};

class VisionEncoder {
 public:
  // between_units (may be null) is called between the pass's units of work (a few hundred
  // rows of one matmul or of one attention): where a caller sharing the pool with engines
  // lets their steps run (TurnQueue::Turn::yield), so that decodes keep their pace.
  VisionEncoder(const VisionModel& model, ThreadPool& pool, std::function<void()> between_units = {})
      : model_(model), pool_(pool), between_units_(std::move(between_units)) {}

  // Errors: patches that are not one image's of this model (columns, grid).
  Result<ImageEmbedding> encode(const PixelPatches& patches);

 private:
  struct Pass;  // the activations of one image
  void embed_patches(Pass& p, const PixelPatches& patches);
  void add_learned_positions(Pass& p);
  void run_block(Pass& p, int64_t il);
  void attention(Pass& p, const VisionLayerWeights& l, const std::vector<int64_t>& bounds);
  void feed_forward(Pass& p, const VisionLayerWeights& l);
  void rotate(Pass& p, float* x);
  void rotary_table(Pass& p);
  ImageEmbedding glm_merger(Pass& p);
  ImageEmbedding qwen_merger(Pass& p);
  void linear(const cpu::WeightMatrix& w, const Vec& bias, const float* x, int64_t n, float* y);

  void unit_done() {
    if (between_units_) between_units_();
  }

  const VisionModel& model_;
  ThreadPool& pool_;
  std::function<void()> between_units_;
};

}  // namespace autoglm
