// The safetensors reader: valid files, every header error named with its file and tensor,
// corrupted and truncated images that must give an error and never a crash (also run under
// ASan+UBSan), the real checkpoints of ../shared/models/hf (single file and sharded).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "formats/safetensors.h"
#include "test_util.h"

namespace autoglm {
namespace {

using json = nlohmann::json;

std::vector<uint8_t> image(const json& header, size_t data_bytes) {
  const std::string text = header.dump();
  std::vector<uint8_t> out(8 + text.size() + data_bytes, 0);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(n >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  for (size_t i = 0; i < data_bytes; ++i) out[8 + text.size() + i] = uint8_t(i);
  return out;
}

json valid_header() {
  return {{"__metadata__", {{"format", "pt"}}},
          {"a", {{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {0, 24}}}},
          {"b", {{"dtype", "BF16"}, {"shape", {4}}, {"data_offsets", {24, 32}}}}};
}

Result<std::unique_ptr<SafetensorsFile>> parse(const std::vector<uint8_t>& bytes) {
  return SafetensorsFile::parse(bytes.data(), bytes.size(), "x.safetensors");
}

TEST(Safetensors, ReadsTensorsAndMetadata) {
  const auto bytes = image(valid_header(), 32);
  auto f = parse(bytes);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  ASSERT_EQ((*f)->tensors().size(), 2u);
  const SafetensorsTensor* b = (*f)->find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, "BF16");
  EXPECT_EQ(b->n_elements(), 4);
  EXPECT_EQ(b->n_bytes, 8u);
  EXPECT_EQ(b->data[0], 24);  // the 25th data byte
  EXPECT_EQ((*f)->find("a")->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  EXPECT_EQ((*f)->find("c"), nullptr);
}

// Each broken header: the error names the file and what is wrong.
TEST(Safetensors, HeaderErrorsNameTheFileAndTensor) {
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* expect;
  };
  const Case cases[] = {
      {"unknown dtype", [](json& h) { h["a"]["dtype"] = "F12"; }, "tensor 'a': unknown dtype 'F12'"},
      {"offsets past the data",
       [](json& h) {
         h["b"]["data_offsets"] = {24, 40};
       },
       "tensor 'b': data_offsets [24, 40]"},
      {"size mismatch",
       [](json& h) {
         h["a"]["shape"] = {2, 2};
       },
       "tensor 'a': data_offsets hold 24 bytes"},
      {"overlap",
       [](json& h) {
         h["b"]["data_offsets"] = {20, 28};
       },
       "overlap"},
      {"negative size",
       [](json& h) {
         h["a"]["shape"] = {-2, 3};
       },
       "tensor 'a': 'shape' holds -2"},
      {"reversed offsets",
       [](json& h) {
         h["b"]["data_offsets"] = {32, 24};
       },
       "tensor 'b'"},
      {"missing dtype", [](json& h) { h["a"].erase("dtype"); }, "tensor 'a': 'dtype'"},
      {"metadata not strings", [](json& h) { h["__metadata__"]["n"] = 3; }, "__metadata__ 'n'"},
      {"entry not an object", [](json& h) { h["a"] = 5; }, "tensor 'a': entry is not an object"},
      {"header not an object", [](json& h) { h = json::array({1}); }, "not a JSON object"},
  };
  for (const auto& c : cases) {
    json h = valid_header();
    c.edit(h);
    const auto f = parse(image(h, 32));
    ASSERT_FALSE(f.is_ok()) << c.what;
    EXPECT_NE(f.status().message().find("x.safetensors"), std::string::npos) << f.status().message();
    EXPECT_NE(f.status().message().find(c.expect), std::string::npos) << c.what << ": " << f.status().message();
  }
  auto bytes = image(valid_header(), 32);
  bytes[0] = 0xff;  // header length beyond the file
  EXPECT_NE(parse(bytes).status().message().find("does not fit"), std::string::npos);
  bytes = image(valid_header(), 32);
  bytes[8] = '[';  // not JSON any more
  EXPECT_NE(parse(bytes).status().message().find("not valid JSON"), std::string::npos);
  EXPECT_FALSE(SafetensorsFile::open("/nonexistent/model.safetensors").is_ok());
}

// Every truncation and thousands of byte corruptions of a valid image: an error or a valid
// file whose tensors lie inside the image, never a crash.
TEST(Safetensors, CorruptImagesNeverCrash) {
  const auto good = image(valid_header(), 32);
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + long(n));
    EXPECT_FALSE(parse(cut).is_ok()) << "truncated to " << n;
  }
  std::mt19937 rng(17);
  const uint8_t replacements[] = {0x00, 0xff, '"', '{', '}', '[', ']', ',', ':', '9', '-', 'e'};
  int accepted = 0;
  for (int i = 0; i < 4000; ++i) {
    auto bad = good;
    const size_t pos = rng() % (good.size() - 32);  // header bytes and the length prefix
    bad[pos] = replacements[rng() % sizeof(replacements)];
    auto f = parse(bad);
    if (!f.is_ok()) continue;
    ++accepted;
    for (const auto& t : (*f)->tensors()) {
      EXPECT_GE(t.data, bad.data());
      EXPECT_LE(t.data + t.n_bytes, bad.data() + bad.size());
    }
  }
  EXPECT_LT(accepted, 4000);  // most corruptions are caught
}

TEST(Safetensors, RealSingleFileCheckpoint) {
  AUTOGLM_REQUIRE_SHARED("models/hf/qwen2-tiny/model.safetensors");
  auto ck = SafetensorsCheckpoint::open_folder(test::shared_path("models/hf/qwen2-tiny"));
  ASSERT_TRUE(ck.is_ok()) << ck.status().message();
  const SafetensorsTensor* embed = (*ck)->find("model.embed_tokens.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->dtype, "BF16");
  EXPECT_EQ(embed->shape, (std::vector<int64_t>{151936, 32}));
}

TEST(Safetensors, RealShardedCheckpointFollowsTheIndex) {
  AUTOGLM_REQUIRE_SHARED("models/hf/llama3-tiny/model.safetensors.index.json");
  auto ck = SafetensorsCheckpoint::open_folder(test::shared_path("models/hf/llama3-tiny"));
  ASSERT_TRUE(ck.is_ok()) << ck.status().message();
  EXPECT_EQ((*ck)->files().size(), 2u);
  ASSERT_NE((*ck)->find("lm_head.weight"), nullptr);
  ASSERT_NE((*ck)->find("model.embed_tokens.weight"), nullptr);
  EXPECT_EQ((*ck)->find("no.such.tensor"), nullptr);
}

TEST(Safetensors, IndexListingAMissingTensorIsAnError) {
  namespace fs = std::filesystem;
  const fs::path dir = test::temp_path("st-index");
  fs::create_directories(dir);
  const auto bytes = image(valid_header(), 32);
  std::ofstream(dir / "model-00001-of-00001.safetensors", std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), long(bytes.size()));
  json index = {{"weight_map",
                 {{"a", "model-00001-of-00001.safetensors"},
                  {"b", "model-00001-of-00001.safetensors"},
                  {"c", "model-00001-of-00001.safetensors"}}}};
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  auto ck = SafetensorsCheckpoint::open_folder(dir.string());
  ASSERT_FALSE(ck.is_ok());
  EXPECT_NE(ck.status().message().find("tensor 'c' listed in the index is missing"), std::string::npos)
      << ck.status().message();
  EXPECT_FALSE(SafetensorsCheckpoint::open_folder((dir / "nothing").string()).is_ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace autoglm
