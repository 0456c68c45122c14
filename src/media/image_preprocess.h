// An image as a vision model's Hugging Face image processor prepares it (Qwen2-VL's and
// GLM-4.1V's, the slow PIL path; docs/vision-preprocessing.md has the facts): RGB by dropping
// alpha (Pillow's convert("RGB")), smart_resize to multiples of patch x merge within the pixel
// limits (Python's round-half-even), Pillow's 8-bit bicubic resize bit for bit, rescale and
// normalise in float32, the frame repeated over the temporal patch, and the patches flattened
// in 2x2 merge blocks: rows of C x temporal x patch x patch values.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "autoglm/status.h"
#include "media/image_decode.h"

namespace autoglm {

struct VisionPreprocess {
  int32_t patch_size = 14, merge_size = 2, temporal_patch_size = 2;
  int64_t min_pixels = 56 * 56, max_pixels = 14 * 14 * 4 * 1280;  // Qwen2-VL's defaults
  // GLM-4.1V checks the limits against temporal x H x W (its smart_resize takes the frames).
  bool limits_count_frames = false;
  std::array<float, 3> mean = {0.48145466f, 0.4578275f, 0.40821073f};  // OpenAI CLIP's
  std::array<float, 3> std = {0.26862954f, 0.26130258f, 0.27577711f};
};

struct ResizedSize {
  int32_t height = 0, width = 0;
};
// The size an image of h x w is resized to; errors for an aspect ratio over 200 or an image the
// limits cannot hold.
Result<ResizedSize> smart_resize(int64_t height, int64_t width, const VisionPreprocess& p);

// Pillow's Image.resize(BICUBIC) of 8-bit RGB (3 bytes a pixel): the same bytes.
std::vector<uint8_t> resize_bicubic_rgb(const std::vector<uint8_t>& rgb, int32_t width, int32_t height,
                                        int32_t out_width, int32_t out_height);

struct PixelPatches {
  std::vector<float> values;  // rows x cols, row-major
  int64_t rows = 0, cols = 0;
  int32_t grid_t = 1, grid_h = 0, grid_w = 0;  // image_grid_thw, in patches
};
Result<PixelPatches> preprocess_image(const Image& image, const VisionPreprocess& p);

}  // namespace autoglm
