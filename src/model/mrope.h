// Multimodal RoPE positions (Qwen2-VL's and GLM-4.1V's get_rope_index, for images): text tokens
// count up on all three axes; an image's tokens sit on its merged grid, (t, h, w) = (s, s + row,
// s + column) from the position s after the text before it; the text after an image goes on
// from s + max(rows, columns). A later token at index n (decoding) is at n + delta on every axis.
#pragma once

#include <cstdint>
#include <vector>

namespace autoglm {

// An image's placeholder tokens in a prompt: [first, first + rows * cols), raster order.
struct ImageSpan {
  int64_t first = 0;
  int32_t rows = 0, cols = 0;  // the merged grid
  int64_t n_tokens() const { return int64_t(rows) * cols; }
};

struct MropePositions {
  std::vector<int32_t> positions;  // 3 per token (t, h, w), token-major
  int64_t delta = 0;               // a token at index n >= the prompt's length: n + delta on all axes
};

// `spans` ascending and within [0, n_tokens), not overlapping (the caller checks).
MropePositions mrope_positions(int64_t n_tokens, const std::vector<ImageSpan>& spans);

}  // namespace autoglm
