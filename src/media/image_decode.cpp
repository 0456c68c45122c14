#include "media/image_decode.h"

#include <png.h>
#include <webp/decode.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

#include <jpeglib.h>

namespace autoglm {
namespace {

Status too_large(const char* format, int64_t width, int64_t height, int64_t max_pixels) {
  return invalid_argument(std::string(format) + " image of " + std::to_string(width) + "x" + std::to_string(height) +
                          " pixels is over the limit of " + std::to_string(max_pixels) + " (limits.image_pixels)");
}

Status check_size(const char* format, int64_t width, int64_t height, int64_t max_pixels) {
  if (width <= 0 || height <= 0) return invalid_argument(std::string(format) + " image has no pixels");
  if (width > (int64_t(1) << 20) || height > (int64_t(1) << 20) || width * height > max_pixels)
    return too_large(format, width, height, max_pixels);
  return Status::ok();
}

Result<Image> decode_png(std::string_view bytes, int64_t max_pixels) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size()))
    return invalid_argument(std::string("png image is corrupt: ") + png.message);
  if (Status st = check_size("png", png.width, png.height, max_pixels); !st.is_ok()) {
    png_image_free(&png);
    return st;
  }
  png.format = PNG_FORMAT_RGBA;
  Image out;
  out.width = int32_t(png.width);
  out.height = int32_t(png.height);
  out.rgba.resize(size_t(PNG_IMAGE_SIZE(png)));
  if (!png_image_finish_read(&png, nullptr, out.rgba.data(), 0, nullptr))
    return invalid_argument(std::string("png image is corrupt: ") + png.message);
  return out;
}

// libjpeg reports a fatal error by calling error_exit, which must not return: it jumps back
// to the decode with the message kept.
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

void jpeg_quiet(j_common_ptr, int) {}  // warnings (a corrupt but decodable file) are not errors

// Everything that lives across the setjmp is declared before it (no C++ object is created
// between the jump's two ends): `out` holds the pixels, `status` what went wrong.
Status decode_jpeg_into(std::string_view bytes, int64_t max_pixels, Image& out) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_fail;
  err.mgr.emit_message = jpeg_quiet;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return invalid_argument(std::string("jpeg image is corrupt: ") + err.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  if (Status st = check_size("jpeg", cinfo.image_width, cinfo.image_height, max_pixels); !st.is_ok()) {
    jpeg_destroy_decompress(&cinfo);
    return st;
  }
  cinfo.out_color_space = JCS_EXT_RGBA;  // grayscale and YCbCr alike; CMYK is an error
  jpeg_start_decompress(&cinfo);
  out.width = int32_t(cinfo.output_width);
  out.height = int32_t(cinfo.output_height);
  out.rgba.resize(size_t(out.width) * size_t(out.height) * 4);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW line = out.rgba.data() + size_t(cinfo.output_scanline) * size_t(out.width) * 4;
    jpeg_read_scanlines(&cinfo, &line, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return Status::ok();
}

Result<Image> decode_webp(std::string_view bytes, int64_t max_pixels) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  int width = 0, height = 0;
  if (!WebPGetInfo(data, bytes.size(), &width, &height)) return invalid_argument("webp image is corrupt");
  AUTOGLM_RETURN_IF_ERROR(check_size("webp", width, height, max_pixels));
  Image out;
  out.width = width;
  out.height = height;
  out.rgba.resize(size_t(width) * size_t(height) * 4);
  if (!WebPDecodeRGBAInto(data, bytes.size(), out.rgba.data(), out.rgba.size(), width * 4))
    return invalid_argument("webp image is corrupt (its pixels do not decode)");
  return out;
}

}  // namespace

const char* image_format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::kPng: return "png";
    case ImageFormat::kJpeg: return "jpeg";
    case ImageFormat::kWebp: return "webp";
  }
  return "png";
}

std::optional<ImageFormat> sniff_image_format(std::string_view b) {
  if (b.size() >= 8 && b.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8)) return ImageFormat::kPng;
  if (b.size() >= 3 && b.substr(0, 3) == "\xff\xd8\xff") return ImageFormat::kJpeg;
  if (b.size() >= 12 && b.substr(0, 4) == "RIFF" && b.substr(8, 4) == "WEBP") return ImageFormat::kWebp;
  return std::nullopt;
}

Result<Image> decode_image(std::string_view bytes, int64_t max_pixels) {
  const std::optional<ImageFormat> format = sniff_image_format(bytes);
  if (!format) return invalid_argument("the image is not PNG, JPEG or WebP (by its first bytes)");
  switch (*format) {
    case ImageFormat::kPng: return decode_png(bytes, max_pixels);
    case ImageFormat::kWebp: return decode_webp(bytes, max_pixels);
    case ImageFormat::kJpeg: {
      Image out;
      AUTOGLM_RETURN_IF_ERROR(decode_jpeg_into(bytes, max_pixels, out));
      return out;
    }
  }
  return invalid_argument("unknown image format");
}

}  // namespace autoglm
