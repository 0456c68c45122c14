// Images as requests send them: data URLs (base64 and percent-encoded, bounded) and PNG, JPEG
// and WebP decoded by Debian's libraries, each written by the same libraries' encoders here, with
// their pixels compared (PNG and lossless WebP exactly, JPEG within its loss), and bad input
// (truncated, another format, too many pixels) refused with a message that says so.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/base64.h"
#include "image_test_util.h"
#include "media/data_url.h"
#include "media/image_decode.h"

namespace autoglm {
namespace {

TEST(Media, PngAndLosslessWebpDecodeToTheSamePixels) {
  const int w = 37, h = 23;
  const std::vector<uint8_t> card = test_card(w, h);
  for (const std::string& bytes : {encode_png(card, w, h), encode_webp_lossless(card, w, h)}) {
    auto image = decode_image(bytes, 1 << 20);
    ASSERT_TRUE(image.is_ok()) << image.status().message();
    EXPECT_EQ(image->width, w);
    EXPECT_EQ(image->height, h);
    EXPECT_EQ(image->rgba, card) << image_format_name(*sniff_image_format(bytes));
  }
}

TEST(Media, JpegDecodesWithinItsLossAndOpaque) {
  const int w = 64, h = 48;
  const std::vector<uint8_t> card = test_card(w, h);
  const std::string bytes = encode_jpeg(card, w, h);
  ASSERT_EQ(sniff_image_format(bytes), ImageFormat::kJpeg);
  auto image = decode_image(bytes, 1 << 20);
  ASSERT_TRUE(image.is_ok()) << image.status().message();
  ASSERT_EQ(image->width, w);
  ASSERT_EQ(image->height, h);
  double error = 0;
  for (size_t i = 0; i < card.size(); i += 4) {
    for (int c = 0; c < 3; ++c) error += std::abs(int(image->rgba[i + c]) - int(card[i + c]));
    EXPECT_EQ(image->rgba[i + 3], 255) << "JPEG has no alpha";
  }
  EXPECT_LT(error / (w * h * 3), 3.0) << "mean absolute error per channel at quality 95";
}

TEST(Media, BadImagesAreRefusedWithTheReason) {
  const std::vector<uint8_t> card = test_card(16, 16);
  const std::string png = encode_png(card, 16, 16), jpeg = encode_jpeg(card, 16, 16),
                    webp = encode_webp_lossless(card, 16, 16);
  for (const std::string& bytes : {png, jpeg, webp}) {
    const std::string name = image_format_name(*sniff_image_format(bytes));
    auto truncated = decode_image(bytes.substr(0, bytes.size() / 2), 1 << 20);
    ASSERT_FALSE(truncated.is_ok()) << name;
    EXPECT_NE(truncated.status().message().find(name), std::string::npos) << truncated.status().message();
    auto big = decode_image(bytes, 255);
    ASSERT_FALSE(big.is_ok()) << name;
    EXPECT_NE(big.status().message().find("over the limit of 255"), std::string::npos) << big.status().message();
  }
  auto gif = decode_image("GIF89a\x01\x00\x01\x00", 1 << 20);
  ASSERT_FALSE(gif.is_ok());
  EXPECT_NE(gif.status().message().find("not PNG, JPEG or WebP"), std::string::npos);
}

TEST(Media, DataUrlsGiveTheirTypeAndBytes) {
  const std::vector<uint8_t> card = test_card(8, 8);
  const std::string png = encode_png(card, 8, 8);
  auto url = parse_data_url("data:image/PNG;base64," + base64_encode(png.data(), png.size()), 1 << 20);
  ASSERT_TRUE(url.is_ok()) << url.status().message();
  EXPECT_EQ(url->media_type, "image/png");
  EXPECT_EQ(url->bytes, png);
  auto plain = parse_data_url("data:,a%20b", 100);
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(plain->media_type, "text/plain");
  EXPECT_EQ(plain->bytes, "a b");
  EXPECT_FALSE(parse_data_url("http://example.com/a.png", 100).is_ok());
  EXPECT_FALSE(parse_data_url("data:image/png;base64", 100).is_ok()) << "no comma";
  EXPECT_FALSE(parse_data_url("data:image/png;base64,ab*d", 100).is_ok()) << "not base64";
  auto over = parse_data_url("data:image/png;base64," + std::string(400, 'A'), 100);
  ASSERT_FALSE(over.is_ok());
  EXPECT_NE(over.status().message().find("more than 100 bytes"), std::string::npos);
}

TEST(Media, Base64RoundTripsAndRefusesWhatIsNot) {
  for (size_t n = 0; n < 10; ++n) {
    std::string bytes;
    for (size_t i = 0; i < n; ++i) bytes += char(i * 37 + 200);
    const std::string text = base64_encode(bytes.data(), bytes.size());
    EXPECT_EQ(base64_decode(text), bytes) << n;
    EXPECT_EQ(base64_decode(text.substr(0, text.find('='))), bytes) << "unpadded, " << n;
  }
  EXPECT_EQ(base64_decode("aGVs\nbG8="), "hello");
  EXPECT_FALSE(base64_decode("a"));
  EXPECT_FALSE(base64_decode("aGVsbG8=aGVs")) << "data after the padding";
  EXPECT_FALSE(base64_decode("aGVsbG8===")) << "three padding characters";
  EXPECT_FALSE(base64_decode("aGVsbG8=", 4)) << "over max_bytes";
}

}  // namespace
}  // namespace autoglm
