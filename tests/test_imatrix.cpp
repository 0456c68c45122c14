// autoglm imatrix: the statistics against llama-imatrix's file for the same model and text
// (tests/data/stories260k_c128.imatrix: llama-imatrix 2026-09 -m stories260K.gguf
// -f tests/data/stories_ppl.txt -c 128), the file formats both ways, and quantize --imatrix.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "autoglm/model_tools.h"
#include "formats/gguf.h"
#include "formats/imatrix_file.h"
#include "test_util.h"

namespace autoglm {
namespace {

std::string data_path(const std::string& name) {
  return std::string(AUTOGLM_SOURCE_DIR) + "/tests/data/" + name;
}

class StoriesImatrix : public ::testing::Test {
 protected:
  void SetUp() override { AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf"); }
  std::string model = test::shared_path("models/stories260K.gguf");
};

// Every matrix of the blocks, its count of tokens and each column's sum of squares, as
// llama-imatrix has them for the same model, text and chunks.
TEST_F(StoriesImatrix, MatchesLlamaImatrix) {
  const std::string out = test::temp_path("stories.imatrix.gguf");
  ImatrixOptions o;
  o.n_ctx = 128;
  o.threads = 2;
  o.dataset = "stories_ppl.txt";
  int64_t chunks_seen = 0;
  o.on_chunk = [&](int64_t done, int64_t, double, double) { chunks_seen = done; };
  auto report = compute_imatrix(model, test::read_file(data_path("stories_ppl.txt")), out, o);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_EQ(report->n_chunk, 78);
  EXPECT_EQ(chunks_seen, 78);
  EXPECT_NEAR(report->ppl, 3.0255, 0.002);  // llama-imatrix prints the same perplexity
  auto ours = read_imatrix(out);
  ASSERT_TRUE(ours.is_ok()) << ours.status().message();
  auto theirs = read_imatrix(data_path("stories260k_c128.imatrix"));
  ASSERT_TRUE(theirs.is_ok()) << theirs.status().message();
  EXPECT_EQ(ours->chunk_count, 78);
  EXPECT_EQ(ours->chunk_size, 128);
  EXPECT_EQ(ours->datasets, std::vector<std::string>{"stories_ppl.txt"});
  ASSERT_EQ(ours->entries.size(), theirs->entries.size());
  for (const auto& [name, want] : theirs->entries) {
    ASSERT_TRUE(ours->entries.count(name)) << name;
    const ImatrixEntry& got = ours->entries.at(name);
    ASSERT_EQ(got.n_cols, want.n_cols) << name;
    EXPECT_EQ(got.counts, want.counts) << name;
    ASSERT_EQ(got.sums.size(), want.sums.size()) << name;
    for (size_t i = 0; i < want.sums.size(); ++i)
      ASSERT_NEAR(got.sums[i], want.sums[i], 2e-3 * std::fabs(want.sums[i]) + 1e-3) << name << " column " << i;
  }
  std::filesystem::remove(out);
}

TEST(ImatrixFile, GgufRoundTripAndWeights) {
  Imatrix m;
  m.datasets = {"a.txt"};
  m.chunk_count = 3, m.chunk_size = 64;
  m.entries["blk.0.attn_q.weight"] = {2, {4, 8}, {2}};
  m.entries["blk.0.ffn_up_exps.weight"] = {2, {3, 6, 5, 5}, {3, 0}};  // expert 1 saw nothing
  const std::string path = test::temp_path("rt.imatrix.gguf");
  ASSERT_TRUE(write_imatrix(m, path).is_ok());
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.is_ok());
  EXPECT_EQ((*file)->get_string("general.type"), "imatrix");
  const GgufTensorInfo* sums = (*file)->find_tensor("blk.0.ffn_up_exps.weight.in_sum2");
  ASSERT_NE(sums, nullptr);
  EXPECT_EQ(sums->dims, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ((*file)->find_tensor("blk.0.ffn_up_exps.weight.counts")->dims, (std::vector<int64_t>{1, 2}));
  auto back = read_imatrix(path);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->datasets, m.datasets);
  EXPECT_EQ(back->chunk_count, 3);
  EXPECT_EQ(back->entries.at("blk.0.ffn_up_exps.weight").sums, m.entries.at("blk.0.ffn_up_exps.weight").sums);
  EXPECT_EQ(*back->weights("blk.0.attn_q.weight"), (std::vector<float>{2, 4}));
  EXPECT_EQ(*back->weights("blk.0.ffn_up_exps.weight"), (std::vector<float>{1, 2, 1, 1}));  // means; 1 unseen
  EXPECT_FALSE(back->weights("blk.9.attn_q.weight").has_value());
  std::filesystem::remove(path);
}

// The older .dat form: an entry count, then per entry its name, ncall, nval and the values
// (means times ncall), then the chunk count and the dataset's name.
TEST(ImatrixFile, ReadsTheDatForm) {
  const std::string path = test::temp_path("old.imatrix.dat");
  {
    std::ofstream f(path, std::ios::binary);
    auto put = [&](int32_t v) { f.write(reinterpret_cast<const char*>(&v), 4); };
    put(1);
    const std::string name = "blk.0.attn_k.weight";
    put(int32_t(name.size()));
    f.write(name.data(), std::streamsize(name.size()));
    put(4);  // ncall
    put(3);  // nval
    const float values[3] = {4, 8, 12};
    f.write(reinterpret_cast<const char*>(values), 12);
    put(7);
    const std::string dataset = "wiki.txt";
    put(int32_t(dataset.size()));
    f.write(dataset.data(), std::streamsize(dataset.size()));
  }
  auto m = read_imatrix(path);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(*m->weights("blk.0.attn_k.weight"), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(m->chunk_count, 7);
  EXPECT_EQ(m->datasets, std::vector<std::string>{"wiki.txt"});
  std::filesystem::remove(path);
}

TEST(ImatrixFile, ErrorsNameTheFileAndEntry) {
  const std::string path = test::temp_path("bad.imatrix.gguf");
  GgufWriter w;
  w.set("general.type", GgufValue::string("imatrix"));
  std::vector<uint8_t> sums(8, 0);
  ASSERT_TRUE(w.add_tensor("blk.0.attn_q.weight.in_sum2", DType::F32, {2, 1}, sums).is_ok());
  ASSERT_TRUE(w.write(path).is_ok());
  auto m = read_imatrix(path);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find(path), std::string::npos);
  EXPECT_NE(m.status().message().find("blk.0.attn_q.weight"), std::string::npos) << m.status().message();
  std::ofstream(path, std::ios::binary) << "not an imatrix at all";
  EXPECT_FALSE(read_imatrix(path).is_ok());
  std::filesystem::remove(path);
}

// quantize --imatrix: the file is named in the metadata, and a mix that needs one runs only with it.
TEST_F(StoriesImatrix, QuantizeReadsTheImatrix) {
  const std::string out = test::temp_path("stories-imx.gguf");
  QuantizeModelOptions q;
  q.type = "q4_0";
  q.imatrix = data_path("stories260k_c128.imatrix");
  auto report = quantize_model(model, out, q);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  auto file = GgufFile::open(out);
  ASSERT_TRUE(file.is_ok());
  EXPECT_EQ((*file)->get_string("quantize.imatrix.file"), q.imatrix);
  EXPECT_EQ((*file)->get_int("quantize.imatrix.entries_count"), 35);
  EXPECT_EQ((*file)->get_int("quantize.imatrix.chunks_count"), 78);
  EXPECT_EQ((*file)->find_tensor("blk.0.attn_q.weight")->type, DType::Q4_0);
  EXPECT_EQ((*file)->find_tensor("blk.0.ffn_down.weight")->type, DType::F16);  // rows of 172: no 32-blocks
  q.imatrix = test::temp_path("missing.imatrix");
  auto missing = quantize_model(model, out, q);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("missing.imatrix"), std::string::npos);
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace autoglm
