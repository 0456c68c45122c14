// Images for tests, written by Debian's libpng, libjpeg-turbo and libwebp encoders.
#pragma once

#include <gtest/gtest.h>
#include <png.h>
#include <webp/encode.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <jpeglib.h>

namespace autoglm {

// A w x h RGBA test card: a gradient with an alpha ramp.
inline std::vector<uint8_t> test_card(int w, int h) {
  std::vector<uint8_t> p(size_t(w * h * 4));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* q = p.data() + (y * w + x) * 4;
      q[0] = uint8_t(x * 255 / std::max(1, w - 1));
      q[1] = uint8_t(y * 255 / std::max(1, h - 1));
      q[2] = uint8_t((x + y) * 255 / std::max(1, w + h - 2));
      q[3] = uint8_t(255 - x);
    }
  return p;
}

inline std::string encode_png(const std::vector<uint8_t>& rgba, int w, int h) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = png_uint_32(w);
  png.height = png_uint_32(h);
  png.format = PNG_FORMAT_RGBA;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&png, nullptr, &size, 0, rgba.data(), 0, nullptr));
  std::string out(size, '\0');
  EXPECT_TRUE(png_image_write_to_memory(&png, out.data(), &size, 0, rgba.data(), 0, nullptr));
  out.resize(size);
  return out;
}

inline std::string encode_jpeg(const std::vector<uint8_t>& rgba, int w, int h) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* mem = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &mem, &size);
  c.image_width = JDIMENSION(w);
  c.image_height = JDIMENSION(h);
  c.input_components = 4;
  c.in_color_space = JCS_EXT_RGBA;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(rgba.data()) + size_t(c.next_scanline) * size_t(w) * 4;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string out(reinterpret_cast<char*>(mem), size);
  std::free(mem);
  return out;
}

inline std::string encode_webp_lossless(const std::vector<uint8_t>& rgba, int w, int h) {
  uint8_t* mem = nullptr;
  const size_t size = WebPEncodeLosslessRGBA(rgba.data(), w, h, w * 4, &mem);
  std::string out(reinterpret_cast<char*>(mem), size);
  WebPFree(mem);
  return out;
}

}  // namespace autoglm
