#include "media/image_preprocess.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace autoglm {
namespace {

// Python's round(): halves to even (the default rounding mode of nearbyint).
double py_round(double x) {
  return std::nearbyint(x);
}

// Pillow's bicubic kernel (a = -0.5, support 2).
double bicubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

constexpr int kPrecisionBits = 32 - 8 - 2;

// One axis's taps: for each output index, the first input index and its fixed-point weights.
struct Taps {
  std::vector<int32_t> first, count;
  std::vector<int32_t> weights;  // count[i] of them from i * stride
  int32_t stride = 0;
};

Taps precompute_taps(int32_t in, int32_t out) {
  const double scale = double(in) / out, filterscale = std::max(scale, 1.0);
  const double support = 2.0 * filterscale, ss = 1.0 / filterscale;
  Taps t;
  t.stride = int32_t(std::ceil(support)) * 2 + 1;
  t.first.resize(size_t(out));
  t.count.resize(size_t(out));
  t.weights.assign(size_t(out) * size_t(t.stride), 0);
  std::vector<double> w(size_t(t.stride));
  for (int32_t i = 0; i < out; ++i) {
    const double center = (i + 0.5) * scale;
    int32_t xmin = int32_t(center - support + 0.5);  // C's truncation, as Pillow casts
    if (xmin < 0) xmin = 0;
    int32_t xmax = int32_t(center + support + 0.5);
    if (xmax > in) xmax = in;
    const int32_t n = xmax - xmin;
    double total = 0;
    for (int32_t j = 0; j < n; ++j) total += w[size_t(j)] = bicubic((j + xmin - center + 0.5) * ss);
    for (int32_t j = 0; j < n; ++j) {
      const double v = total != 0.0 ? w[size_t(j)] / total : w[size_t(j)];
      const double scaled = v * double(1 << kPrecisionBits);
      t.weights[size_t(i) * size_t(t.stride) + size_t(j)] = int32_t(v < 0 ? scaled - 0.5 : scaled + 0.5);
    }
    t.first[size_t(i)] = xmin;
    t.count[size_t(i)] = n;
  }
  return t;
}

uint8_t clip8(int32_t acc) {
  const int32_t v = acc >> kPrecisionBits;  // arithmetic shift: floor, as Pillow's
  return uint8_t(std::clamp(v, 0, 255));
}

// One pass along x (horizontal) or y (vertical) over 3-channel rows.
std::vector<uint8_t> pass(const std::vector<uint8_t>& src, int32_t w, int32_t h, const Taps& t, bool horizontal,
                          int32_t out) {
  const int32_t ow = horizontal ? out : w, oh = horizontal ? h : out;
  std::vector<uint8_t> dst(size_t(ow) * size_t(oh) * 3);
  for (int32_t y = 0; y < oh; ++y)
    for (int32_t x = 0; x < ow; ++x) {
      const int32_t i = horizontal ? x : y;
      const int32_t* k = t.weights.data() + size_t(i) * size_t(t.stride);
      for (int c = 0; c < 3; ++c) {
        int32_t acc = 1 << (kPrecisionBits - 1);
        for (int32_t j = 0; j < t.count[size_t(i)]; ++j) {
          const int32_t sx = horizontal ? t.first[size_t(i)] + j : x, sy = horizontal ? y : t.first[size_t(i)] + j;
          acc += int32_t(src[(size_t(sy) * size_t(w) + size_t(sx)) * 3 + size_t(c)]) * k[j];
        }
        dst[(size_t(y) * size_t(ow) + size_t(x)) * 3 + size_t(c)] = clip8(acc);
      }
    }
  return dst;
}

}  // namespace

Result<ResizedSize> smart_resize(int64_t height, int64_t width, const VisionPreprocess& p) {
  const double factor = double(p.patch_size) * p.merge_size;
  if (height <= 0 || width <= 0) return invalid_argument("the image has no pixels");
  if (double(std::max(height, width)) / double(std::min(height, width)) > 200)
    return invalid_argument("the image's aspect ratio " + std::to_string(std::max(height, width)) + ":" +
                            std::to_string(std::min(height, width)) + " is over 200:1");
  const double frames = p.limits_count_frames ? p.temporal_patch_size : 1;
  const double h = double(height), w = double(width);
  double h_bar = py_round(h / factor) * factor, w_bar = py_round(w / factor) * factor;
  if (frames * h_bar * w_bar > double(p.max_pixels)) {
    const double beta = std::sqrt(frames * h * w / double(p.max_pixels));
    h_bar = std::max(factor, std::floor(h / beta / factor) * factor);
    w_bar = std::max(factor, std::floor(w / beta / factor) * factor);
  } else if (frames * h_bar * w_bar < double(p.min_pixels)) {
    const double beta = std::sqrt(double(p.min_pixels) / (frames * h * w));
    h_bar = std::ceil(h * beta / factor) * factor;
    w_bar = std::ceil(w * beta / factor) * factor;
  }
  if (h_bar < factor || w_bar < factor || h_bar > 1e5 || w_bar > 1e5)
    return invalid_argument("the image cannot be resized within the pixel limits");
  return ResizedSize{int32_t(h_bar), int32_t(w_bar)};
}

std::vector<uint8_t> resize_bicubic_rgb(const std::vector<uint8_t>& rgb, int32_t width, int32_t height,
                                        int32_t out_width, int32_t out_height) {
  std::vector<uint8_t> out = rgb;
  int32_t w = width;
  if (out_width != width) {  // horizontal first, its result kept in 8 bits, as Pillow's
    out = pass(out, w, height, precompute_taps(width, out_width), true, out_width);
    w = out_width;
  }
  if (out_height != height) out = pass(out, w, height, precompute_taps(height, out_height), false, out_height);
  return out;
}

Result<PixelPatches> preprocess_image(const Image& image, const VisionPreprocess& p) {
  AUTOGLM_ASSIGN_OR_RETURN(const ResizedSize size, smart_resize(image.height, image.width, p));
  std::vector<uint8_t> rgb(size_t(image.width) * size_t(image.height) * 3);
  for (size_t i = 0, n = size_t(image.width) * size_t(image.height); i < n; ++i)  // alpha dropped
    for (int c = 0; c < 3; ++c) rgb[i * 3 + size_t(c)] = image.rgba[i * 4 + size_t(c)];
  const std::vector<uint8_t> resized = resize_bicubic_rgb(rgb, image.width, image.height, size.width, size.height);
  const int32_t ps = p.patch_size, m = p.merge_size, tp = p.temporal_patch_size;
  PixelPatches out;
  out.grid_h = size.height / ps;
  out.grid_w = size.width / ps;
  out.rows = int64_t(out.grid_h) * out.grid_w;
  out.cols = int64_t(3) * tp * ps * ps;
  out.values.resize(size_t(out.rows * out.cols));
  // Rows in m x m merge blocks, blocks in raster order; columns (channel, frame, y, x).
  int64_t r = 0;
  for (int32_t bh = 0; bh < out.grid_h / m; ++bh)
    for (int32_t bw = 0; bw < out.grid_w / m; ++bw)
      for (int32_t mh = 0; mh < m; ++mh)
        for (int32_t mw = 0; mw < m; ++mw, ++r) {
          float* row = out.values.data() + r * out.cols;
          for (int c = 0; c < 3; ++c)
            for (int32_t t = 0; t < tp; ++t)  // the one frame repeated over the temporal patch
              for (int32_t py = 0; py < ps; ++py)
                for (int32_t px = 0; px < ps; ++px) {
                  const int32_t y = (bh * m + mh) * ps + py, x = (bw * m + mw) * ps + px;
                  const uint8_t u = resized[(size_t(y) * size_t(size.width) + size_t(x)) * 3 + size_t(c)];
                  const float v = float(double(u) * (1.0 / 255.0));
                  row[((c * tp + t) * ps + py) * ps + px] = (v - p.mean[size_t(c)]) / p.std[size_t(c)];
                }
        }
  return out;
}

}  // namespace autoglm
