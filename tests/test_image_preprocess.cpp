// Vision preprocessing as Hugging Face's image processors do it (docs/vision-preprocessing.md):
// smart_resize's sizes for both models (the worked examples, Python's round-half-even), the
// bicubic resize byte for byte against Pillow itself (Debian's python3-pil, the library the
// processors call), and the patch order of pixel_values.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "media/image_preprocess.h"
#include "test_util.h"

namespace autoglm {
namespace {

VisionPreprocess glm41v() {
  VisionPreprocess p;
  p.min_pixels = 12544;
  p.max_pixels = 9633792;
  p.limits_count_frames = true;
  return p;
}

VisionPreprocess qwen25vl() {
  VisionPreprocess p;
  p.min_pixels = 3136;
  p.max_pixels = 12845056;
  return p;
}

void expect_size(const VisionPreprocess& p, int64_t h, int64_t w, int32_t eh, int32_t ew) {
  auto s = smart_resize(h, w, p);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->height, eh) << h << "x" << w;
  EXPECT_EQ(s->width, ew) << h << "x" << w;
}

TEST(SmartResize, TheWorkedExamplesOfBothModels) {
  expect_size(glm41v(), 2400, 1080, 2408, 1092);
  expect_size(qwen25vl(), 2400, 1080, 2408, 1092);
  expect_size(glm41v(), 1920, 1080, 1932, 1092);
  expect_size(glm41v(), 4032, 3024, 2520, 1876);  // GLM's limit counts the two frames
  expect_size(qwen25vl(), 4032, 3024, 4032, 3024);
  expect_size(glm41v(), 70, 70, 84, 84);  // round(2.5) is 2 (half to even): under GLM's minimum
  expect_size(qwen25vl(), 70, 70, 56, 56);
  EXPECT_FALSE(smart_resize(10, 2100, qwen25vl()).is_ok()) << "an aspect ratio over 200";
}

// Pillow's resize of a random RGB image, through python3 (Debian's python3-pil).
std::vector<uint8_t> pillow_resize(const std::vector<uint8_t>& rgb, int w, int h, int ow, int oh) {
  const std::string in = test::temp_path("resize_in.rgb"), out = test::temp_path("resize_out.rgb");
  std::ofstream(in, std::ios::binary).write(reinterpret_cast<const char*>(rgb.data()), std::streamsize(rgb.size()));
  const std::string script = "import sys; from PIL import Image; im = Image.frombytes('RGB', (" + std::to_string(w) +
                             ", " + std::to_string(h) + "), open('" + in + "', 'rb').read()); open('" + out +
                             "', 'wb').write(im.resize((" + std::to_string(ow) + ", " + std::to_string(oh) +
                             "), resample=Image.BICUBIC, reducing_gap=None).tobytes())";
  const std::string command = "/usr/bin/python3 -c \"" + script + "\"";
  if (std::system(command.c_str()) != 0) return {};
  const std::string bytes = test::read_file(out);
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

bool pillow_present() {
  return std::system("/usr/bin/python3 -c 'import PIL' 2>/dev/null") == 0;
}

TEST(BicubicResize, IsPillowsByteForByte) {
  if (!pillow_present()) {
    if (test::shared_required()) FAIL() << "python3-pil is absent (scripts/install-deps.sh installs it), in CI";
    GTEST_SKIP() << "python3-pil is absent";
  }
  std::mt19937 rng(7);
  const int sizes[][4] = {{64, 48, 28, 28},  {37, 23, 56, 84},     {300, 200, 112, 84}, {50, 60, 50, 28},
                          {45, 90, 140, 90}, {1080, 240, 364, 84}, {29, 31, 28, 28}};
  for (const auto& s : sizes) {
    const int w = s[0], h = s[1], ow = s[2], oh = s[3];
    std::vector<uint8_t> rgb(size_t(w * h * 3));
    for (auto& v : rgb) v = uint8_t(rng() & 255);
    for (int i = 0; i < w * h / 3; ++i) rgb[size_t(rng() % rgb.size())] = (rng() & 1) ? 255 : 0;  // hard edges
    const std::vector<uint8_t> ours = resize_bicubic_rgb(rgb, w, h, ow, oh), theirs = pillow_resize(rgb, w, h, ow, oh);
    ASSERT_EQ(theirs.size(), size_t(ow * oh * 3)) << "Pillow did not resize " << w << "x" << h;
    size_t differ = 0;
    for (size_t i = 0; i < ours.size(); ++i) differ += ours[i] != theirs[i];
    EXPECT_EQ(differ, 0u) << w << "x" << h << " -> " << ow << "x" << oh;
  }
}

TEST(PixelPatches, RowsAreMergeBlocksAndColumnsChannelFrameYX) {
  Image image;
  image.width = 56;
  image.height = 84;  // already multiples of 28: no resize
  image.rgba.resize(size_t(56 * 84 * 4));
  for (size_t i = 0; i < image.rgba.size(); ++i) image.rgba[i] = uint8_t((i * 13) % 251);
  const VisionPreprocess p = qwen25vl();
  auto patches = preprocess_image(image, p);
  ASSERT_TRUE(patches.is_ok()) << patches.status().message();
  EXPECT_EQ(patches->grid_h, 6);
  EXPECT_EQ(patches->grid_w, 4);
  EXPECT_EQ(patches->rows, 24);
  EXPECT_EQ(patches->cols, 1176);
  // Row 5 is block (0, 1), merge cell (0, 1); column 1*392 + 1*196 + 3*14 + 2 is green, frame 1, y 3, x 2.
  const int bh = 0, bw = 1, mh = 0, mw = 1, c = 1, py = 3, px = 2;
  const int y = (bh * 2 + mh) * 14 + py, x = (bw * 2 + mw) * 14 + px;
  const uint8_t u = image.rgba[size_t((y * 56 + x) * 4 + c)];
  const float want = (float(double(u) * (1.0 / 255.0)) - p.mean[1]) / p.std[1];
  EXPECT_EQ(patches->values[size_t(5 * 1176 + 1 * 392 + 1 * 196 + 3 * 14 + 2)], want);
  EXPECT_EQ(patches->values[size_t(5 * 1176 + 1 * 392 + 0 * 196 + 3 * 14 + 2)], want) << "both frames are the image";
}

}  // namespace
}  // namespace autoglm
