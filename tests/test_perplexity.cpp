// autoglm perplexity: llama-perplexity's numbers on the bundled trained model, its
// --kl-divergence-base file either way round, and our quantizer's KL-divergence per type against
// llama.cpp's quantizer (tests/data/quant_kld_reference.json).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autoglm/model_tools.h"
#include "autoglm/perplexity.h"
#include "formats/log_prob_file.h"
#include "test_util.h"

namespace autoglm {
namespace {

using nlohmann::json;

std::string stories_text() {
  return test::read_file(std::string(AUTOGLM_SOURCE_DIR) + "/tests/data/stories_ppl.txt");
}

json reference() {
  return json::parse(test::read_file(std::string(AUTOGLM_SOURCE_DIR) + "/tests/data/quant_kld_reference.json"));
}

std::unique_ptr<Runtime> open_model(const std::string& path) {
  RuntimeOptions o;
  o.threads = 2;
  o.start_engine = false;
  auto rt = Runtime::open(path, o);
  EXPECT_TRUE(rt.is_ok()) << path << ": " << rt.status().message();
  return rt ? std::move(rt).value() : nullptr;
}

PerplexityReport measure(const std::string& model, const PerplexityOptions& o, const std::string& text = "") {
  auto rt = open_model(model);
  if (!rt) return {};
  auto r = measure_perplexity(*rt, text, o);
  EXPECT_TRUE(r.is_ok()) << model << ": " << r.status().message();
  return r ? *r : PerplexityReport{};
}

std::string save_base(const std::string& model, const std::string& name) {
  PerplexityOptions o;
  o.n_ctx = 128;
  o.save_base = test::temp_path(name);
  measure(model, o, stories_text());
  return o.save_base;
}

double kld_against(const std::string& model, const std::string& base) {
  PerplexityOptions o;
  o.kl_base = base;
  const auto r = measure(model, o);
  EXPECT_TRUE(r.kl.has_value()) << model;
  return r.kl ? r.kl->kld.value : 1e9;
}

class StoriesPerplexity : public ::testing::Test {
 protected:
  void SetUp() override { AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf"); }
  std::string model = test::shared_path("models/stories260K.gguf");
};

// llama-perplexity -m stories260K.gguf -f tests/data/stories_ppl.txt -c 128: the same tokens,
// chunks, BOS and scored positions give the same figure.
TEST_F(StoriesPerplexity, MatchesLlamaPerplexity) {
  PerplexityOptions o;
  o.n_ctx = 128;
  int64_t chunks_seen = 0;
  o.on_chunk = [&](const PerplexityProgress& p) { chunks_seen = p.chunk; };
  const auto r = measure(model, o, stories_text());
  const auto want = reference()["llama_perplexity_stories260k_c128"];
  EXPECT_NEAR(r.ppl.value, want["ppl"].get<double>(), 0.002);
  EXPECT_NEAR(r.ppl.error, want["error"].get<double>(), 0.0005);
  EXPECT_EQ(r.n_chunk, 78);
  EXPECT_EQ(chunks_seen, 78);
  EXPECT_EQ(r.scored, 78 * (128 - 1 - 64));
}

// The saved file's layout (llama-perplexity's), and a model compared with its own saved
// log-probabilities differs only by their uint16 rounding.
TEST_F(StoriesPerplexity, BaseFileLayoutAndSelfComparison) {
  const std::string base = save_base(model, "ppl-self.kl");
  const std::string bytes = test::read_file(base);
  ASSERT_GE(bytes.size(), 20u);
  EXPECT_EQ(bytes.substr(0, 8), "_logits_");
  int32_t fields[3];
  std::memcpy(fields, bytes.data() + 8, 12);
  EXPECT_EQ(fields[0], 128);
  EXPECT_EQ(fields[1], 512);
  EXPECT_EQ(fields[2], 78);
  const size_t record = size_t(log_prob_record_values(512)) * 2;
  EXPECT_EQ(bytes.size(), 20 + 4u * 78 * 128 + 78u * 63 * record);
  PerplexityOptions o;
  o.kl_base = base;
  const auto r = measure(model, o);
  ASSERT_TRUE(r.kl.has_value());
  EXPECT_LT(r.kl->kld.value, 1e-5);
  EXPECT_GE(r.kl->same_top.value, 0.999);
  EXPECT_NEAR(r.kl->ppl.value, r.kl->base_ppl.value, 1e-3);
}

TEST(LogProbs, RoundTripWithinHalfAStepAndFloorSixteenBelowTheTop) {
  std::vector<float> logits = {3.0f, -1.0f, 0.5f, -30.0f, 2.25f};
  const auto record = encode_log_probs(logits.data(), 5);
  EXPECT_EQ(int64_t(record.size()), log_prob_record_values(5));
  EXPECT_EQ(record.size(), 4u + 6u);  // 5 values padded to 6
  std::vector<float> lp(5);
  decode_log_probs(record.data(), 5, lp.data());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - 3.0);
  const double shift = 3.0 + std::log(sum);
  const double step = 16.0 / 65535.0;
  for (int i : {0, 1, 2, 4}) EXPECT_NEAR(lp[size_t(i)], logits[size_t(i)] - shift, step / 2 + 1e-6) << i;
  EXPECT_NEAR(lp[3], 3.0 - 16.0 - shift, 1e-5) << "below the floor: at the floor";
}

TEST_F(StoriesPerplexity, ErrorsNameWhatWasWrong) {
  auto rt = open_model(model);
  ASSERT_TRUE(rt);
  PerplexityOptions o;
  o.n_ctx = 128;
  auto short_text = measure_perplexity(*rt, "Once upon a time.", o);
  ASSERT_FALSE(short_text.is_ok());
  EXPECT_NE(short_text.status().message().find("at least 2 x --ctx-size"), std::string::npos);

  const std::string not_logits = test::temp_path("not-logits.kl");
  std::ofstream(not_logits) << "GGUF and more";
  o.kl_base = not_logits;
  auto bad_magic = measure_perplexity(*rt, "", o);
  ASSERT_FALSE(bad_magic.is_ok());
  EXPECT_NE(bad_magic.status().message().find(not_logits), std::string::npos);
  EXPECT_NE(bad_magic.status().message().find("_logits_"), std::string::npos);

  // A base of another vocabulary; then the same file cut short.
  const std::string random_model = test::temp_path("ppl-random-f32.gguf");
  RandomModelOptions ro;
  ro.type = "f32";
  ASSERT_TRUE(write_random_model(ro, random_model).is_ok());
  o.kl_base = save_base(random_model, "ppl-random.kl");
  auto other_vocab = measure_perplexity(*rt, "", o);
  ASSERT_FALSE(other_vocab.is_ok());
  EXPECT_NE(other_vocab.status().message().find("vocabulary of 2048"), std::string::npos)
      << other_vocab.status().message();
  const std::string own = save_base(model, "ppl-cut.kl");
  std::filesystem::resize_file(own, std::filesystem::file_size(own) - 100);
  o.kl_base = own;
  auto cut = measure_perplexity(*rt, "", o);
  ASSERT_FALSE(cut.is_ok());
  EXPECT_NE(cut.status().message().find("end early"), std::string::npos) << cut.status().message();
}

// Our quantizer per type against llama.cpp's (--pure, no imatrix) on the same F32 model and
// text: the mean KL-divergence from the F32 model's distributions is at most 1.15x theirs.
// keep_q8: token_embd and output at Q8_0 (as the lattice types' reference has them).
void expect_kld_within_reference(const std::string& f32_model, const json& want, const std::string& tag,
                                 const std::string& imatrix = "", bool keep_q8 = false) {
  const std::string base = save_base(f32_model, tag + ".kl");
  for (const auto& [type, llama_kld] : want.items()) {
    const std::string out = test::temp_path(tag + "-" + type + ".gguf");
    QuantizeModelOptions q;
    q.type = type;
    q.pure = true;  // every matrix in the type, as llama-quantize --pure
    q.imatrix = imatrix;
    if (keep_q8) q.token_embedding_type = q.output_tensor_type = "q8_0";
    q.threads = 2;
    auto report = quantize_model(f32_model, out, q);
    ASSERT_TRUE(report.is_ok()) << type << ": " << report.status().message();
    const double ours = kld_against(out, base);
    EXPECT_LE(ours, 1.15 * llama_kld.get<double>()) << tag << " " << type;
    EXPECT_GT(ours, 0) << tag << " " << type << ": a lossy type matched the F32 model exactly";
    std::filesystem::remove(out);
  }
  std::filesystem::remove(base);
}

TEST_F(StoriesPerplexity, QuantizerKldPerTypeWithinLlamaCpps) {
  expect_kld_within_reference(model, reference()["stories260k"], "kld-stories");
}

TEST(QuantizerQuality, KldPerTypeWithinLlamaCppsOnTheRandomModel) {
  const std::string f32 = test::temp_path("kld-random-f32.gguf");
  RandomModelOptions ro;
  ro.type = "f32";
  ASSERT_TRUE(write_random_model(ro, f32).is_ok());
  expect_kld_within_reference(f32, reference()["random_llama_tiny"], "kld-random");
  // With the same importance matrix on both sides.
  const std::string imatrix = test::temp_path("kld-random.imatrix.gguf");
  ImatrixOptions io;
  io.n_ctx = 128;
  io.threads = 2;
  ASSERT_TRUE(compute_imatrix(f32, stories_text(), imatrix, io).is_ok());
  expect_kld_within_reference(f32, reference()["random_llama_tiny_imatrix"], "kld-random-imatrix", imatrix);
  expect_kld_within_reference(f32, reference()["random_llama_tiny_imatrix_lattice"], "kld-random-lattice", imatrix,
                              true);
  std::filesystem::remove(imatrix);
  std::filesystem::remove(f32);
}

}  // namespace
}  // namespace autoglm
