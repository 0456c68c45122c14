// An image as a request sends it: a data URL (base64 or percent-encoded) -> its bytes -> PNG,
// JPEG or WebP decoded by Debian's libraries under a pixel limit -> a vision model's pixel
// patches. Errors are values; nothing may crash, a decoded image has exactly width x height RGBA
// pixels within the limit, and its patches fill image_grid_thw's rows.
#include <cstdlib>

#include "media/data_url.h"
#include "media/image_decode.h"
#include "media/image_preprocess.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr int64_t kMaxPixels = 1 << 20;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Raw bytes as an image, and the text as a data URL holding one.
  std::string_view bytes = text;
  auto url = autoglm::parse_data_url(text, 1 << 22);
  for (const std::string_view candidate : {bytes, url ? std::string_view(url->bytes) : std::string_view()}) {
    auto image = autoglm::decode_image(candidate, kMaxPixels);
    if (!image) continue;
    const int64_t pixels = int64_t(image->width) * image->height;
    if (pixels <= 0 || pixels > kMaxPixels || image->rgba.size() != size_t(pixels) * 4) std::abort();
    autoglm::VisionPreprocess p;
    p.max_pixels = 64 * 64;  // small: the fuzzer's time goes to the decoders
    auto patches = autoglm::preprocess_image(*image, p);
    if (patches && (patches->rows != int64_t(patches->grid_h) * patches->grid_w ||
                    patches->values.size() != size_t(patches->rows * patches->cols)))
      std::abort();
  }
  return 0;
}
