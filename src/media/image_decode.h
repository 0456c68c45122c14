// Images as requests send them (PNG, JPEG, WebP, told apart by their first bytes), decoded with
// Debian's libpng, libjpeg-turbo and libwebp into 8-bit RGBA: the pixels a model's image
// processor starts from. The size is read from the header and checked against the limit before
// any pixel is decoded.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "autoglm/status.h"

namespace autoglm {

enum class ImageFormat { kPng, kJpeg, kWebp };
const char* image_format_name(ImageFormat format);  // "png", "jpeg", "webp"

// The format of an image's bytes by their signature; none for another format.
std::optional<ImageFormat> sniff_image_format(std::string_view bytes);

struct Image {
  int32_t width = 0, height = 0;
  std::vector<uint8_t> rgba;  // row-major, 4 bytes a pixel (alpha 255 where the file has none)
};

// Errors name the format and what failed (an unknown format, a truncated or corrupt file, more
// than `max_pixels` pixels).
Result<Image> decode_image(std::string_view bytes, int64_t max_pixels);

}  // namespace autoglm
