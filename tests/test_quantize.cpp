// autoglm quantize's engine: types written, embeddings/output kept higher, metadata carried,
// and the quantized model's logits close to the float model's.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "formats/gguf.h"
#include "formats/imatrix_file.h"
#include "golden_util.h"
#include "kernels/ref/quants.h"
#include "model/create_model.h"
#include "model/model.h"
#include "model/quant_mix.h"
#include "model/quantize_model.h"
#include "model/runner.h"
#include "model_test_util.h"
#include "test_util.h"

namespace autoglm {
namespace {

using nlohmann::json;

std::vector<float> logits_of(const std::string& path, const std::vector<int32_t>& tokens) {
  auto m = Model::load(path);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m) return {};
  return test::forward_all_positions(**m, tokens);
}

// Share of positions whose argmax agrees.
double top1_agreement(const std::vector<float>& a, const std::vector<float>& b, int64_t n_vocab) {
  int64_t same = 0, n = int64_t(a.size()) / n_vocab;
  for (int64_t p = 0; p < n; ++p) {
    const float* ra = a.data() + p * n_vocab;
    const float* rb = b.data() + p * n_vocab;
    same += std::max_element(ra, ra + n_vocab) - ra == std::max_element(rb, rb + n_vocab) - rb;
  }
  return double(same) / double(n);
}

TEST(Quantize, TypesMetadataAndLogits) {
  CreateModelOptions o;
  o.type = DType::F16;
  const std::string f16 = test::temp_path("q-src.gguf");
  ASSERT_TRUE(create_random_model(o, f16).is_ok());
  std::vector<int32_t> tokens;
  for (int i = 0; i < 48; ++i) tokens.push_back(1 + (i * 37) % 2000);
  const auto reference = logits_of(f16, tokens);
  ThreadPool pool(2);
  for (DType t : {DType::Q8_0, DType::Q4_K}) {
    const std::string out = test::temp_path(std::string("q-") + std::string(dtype_name(t)) + ".gguf");
    int64_t calls = 0;
    QuantizeOptions q;
    q.type = t;
    q.keep_type = DType::Q8_0;
    auto report = quantize_gguf(f16, out, q, pool, [&](int64_t, int64_t) { ++calls; });
    ASSERT_TRUE(report.is_ok()) << report.status().message();
    auto file = GgufFile::open(out);
    ASSERT_TRUE(file.is_ok()) << file.status().message();
    EXPECT_EQ((*file)->find_tensor("blk.0.attn_q.weight")->type, t);
    EXPECT_EQ((*file)->find_tensor("token_embd.weight")->type, DType::Q8_0);
    EXPECT_EQ((*file)->find_tensor("blk.0.attn_norm.weight")->type, DType::F32);  // 1-D tensors copied
    EXPECT_EQ((*file)->get_int("general.file_type"), int64_t(gguf_file_type(t)));
    EXPECT_EQ((*file)->get_string("general.architecture"), "llama");
    EXPECT_EQ(calls, int64_t((*file)->tensors().size()));
    EXPECT_LT(report->bytes_out, report->bytes_in);
    const auto got = logits_of(out, tokens);
    ASSERT_EQ(got.size(), reference.size());
    const double agree = top1_agreement(got, reference, 2048);
    std::printf("[quantize] %s: top-1 agreement with f16 %.3f over %zu positions\n", std::string(dtype_name(t)).c_str(),
                agree, tokens.size());
    EXPECT_GE(agree, t == DType::Q8_0 ? 0.9 : 0.7);  // near-flat logits of a random model: ties flip
    std::remove(out.c_str());
  }
  // Bad input names the file.
  auto missing = quantize_gguf("/nonexistent/in.gguf", test::temp_path("x.gguf"), {}, pool);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/in.gguf"), std::string::npos);
  std::remove(f16.c_str());
}

// A corrupt block (its scale a NaN half float) in a file: --check-tensors refuses the model
// naming the tensor, row and block; without it the model loads (the check costs a pass over
// every weight).
TEST(Quantize, CheckTensorsNamesACorruptBlock) {
  CreateModelOptions o;
  o.type = DType::Q4_0;
  const std::string path = test::temp_path("q-corrupt.gguf");
  ASSERT_TRUE(create_random_model(o, path).is_ok());
  uint64_t at = 0;
  {
    auto file = GgufFile::open(path);
    ASSERT_TRUE(file.is_ok()) << file.status().message();
    const GgufTensorInfo* t = (*file)->find_tensor("blk.1.ffn_down.weight");
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->type, DType::Q4_0);
    // Row 3, block 2: 18-byte blocks, the fp16 scale first.
    at = (*file)->data_offset() + t->offset + uint64_t(3 * dtype_row_bytes(DType::Q4_0, t->dims[0]) + 2 * 18);
  }
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(at));
    const char nan_half[2] = {0x00, 0x7e};
    f.write(nan_half, 2);
  }
  ModelLoadOptions checked;
  checked.check_tensors = true;
  auto refused = Model::load(path, checked);
  ASSERT_FALSE(refused.is_ok());
  const std::string& m = refused.status().message();
  EXPECT_NE(m.find("blk.1.ffn_down.weight"), std::string::npos) << m;
  EXPECT_NE(m.find("row 3, block 2"), std::string::npos) << m;
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_TRUE(Model::load(path).is_ok());
  std::remove(path.c_str());
}

// Every type autoglm quantize writes, from the f32 master of the golden cases, against the
// reference engine's f32 logits; the error must be no worse than 1.15x what the reference's
// own quantizer gives for the same type (measured.quant_error_vs_f32 of the golden case). Each
// file is made as the case's was (its README): --pure, the embedding and output at the case's
// types, and the shared importance matrix for the types llama-quantize refuses without one.
TEST(Quantize, EveryTypeAgainstTheFloatReference) {
  AUTOGLM_REQUIRE_SHARED("golden/rand-llama-gqa-f32/case.json");
  AUTOGLM_REQUIRE_SHARED("models/random/rand-llama-gqa.imatrix.gguf");
  const json c = json::parse(test::read_file(test::shared_path("golden/rand-llama-gqa-f32/case.json")));
  auto f32 = GgufFile::open(test::shared_path(c["model"]));
  ASSERT_TRUE(f32.is_ok()) << f32.status().message();
  const std::vector<int32_t> tokens = c["input_tokens"];
  const auto ref = read_f32(test::shared_path("golden/rand-llama-gqa-f32/" + c["logits_file"].get<std::string>()));
  const int64_t n_vocab = c["n_vocab"];
  auto imatrix = read_imatrix(test::shared_path("models/random/rand-llama-gqa.imatrix.gguf"));
  ASSERT_TRUE(imatrix.is_ok()) << imatrix.status().message();
  const auto importance = std::make_shared<const Imatrix>(std::move(imatrix).value());
  ThreadPool pool(2);
  for (DType t : {DType::Q8_0,   DType::Q6_K,  DType::Q5_K,    DType::Q5_1,  DType::Q5_0,   DType::Q4_K,
                  DType::Q4_1,   DType::Q4_0,  DType::MXFP4,   DType::Q3_K,  DType::Q2_K,   DType::IQ4_NL,
                  DType::IQ4_XS, DType::IQ3_S, DType::IQ3_XXS, DType::IQ2_S, DType::IQ2_XS, DType::IQ2_XXS,
                  DType::IQ1_M,  DType::IQ1_S, DType::TQ2_0,   DType::TQ1_0}) {
    std::string name(dtype_name(t));
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
    const json theirs_case =
        json::parse(test::read_file(test::shared_path("golden/rand-llama-gqa-" + name + "/case.json")));
    const json& theirs = theirs_case["measured"]["quant_error_vs_f32"];
    const auto case_type = [&](const char* tensor) {  // dtype_from_name ignores case
      return dtype_from_name(theirs_case["tensor_types"][tensor].get<std::string>());
    };
    QuantizeOptions o;
    o.type = t;
    o.keep_type = std::nullopt;  // every matrix in t, as the golden quantized cases were made ...
    o.mix_choices.output_type = case_type("output.weight");  // ... but for the case's own choices here
    o.mix_choices.token_embedding_type = case_type("token_embd.weight");
    ASSERT_TRUE(o.mix_choices.output_type && o.mix_choices.token_embedding_type) << name;
    if (tensor_needs_imatrix(t, std::nullopt, "blk.0.ffn_down.weight")) o.imatrix = importance;
    auto q = quantize_file(**f32, o, pool);
    ASSERT_TRUE(q.is_ok()) << q.status().message();
    auto m = Model::from_gguf(std::move(q).value());
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    const auto got = test::forward_all_positions(**m, tokens, DType::F32);
    ASSERT_EQ(got.size(), ref.size());
    const Comparison cmp = compare(got, ref, n_vocab);
    std::printf(
        "[quantize vs f32 reference] %-7s top-1 %.3f rms %.4f max_abs %.3f | reference quantizer: top-1 %.3f rms "
        "%.4f\n",
        name.c_str(), cmp.top1, cmp.rms, cmp.max_abs, theirs["top1"].get<double>(), theirs["rms"].get<double>());
    EXPECT_LE(cmp.rms, 1.15 * theirs["rms"].get<double>()) << name;
  }
}

// MXFP4 round trip of normal values: the error of llama.cpp's exponent choice (1.5 * 2^floor(log2
// amax) is the largest value, so a block's top values may clip), about 0.11 of the rms, and
// never more than the clipping allows for any element.
TEST(Quantize, Mxfp4RoundTripErrorBound) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(4096), y(x.size());
  for (auto& v : x) v = dist(rng);
  std::vector<uint8_t> q(size_t(dtype_row_bytes(DType::MXFP4, int64_t(x.size()))));
  ref::quantize_row(DType::MXFP4, x.data(), q.data(), int64_t(x.size()));
  ref::dequantize_row(DType::MXFP4, q.data(), y.data(), int64_t(y.size()));
  double err = 0, norm = 0;
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float top = 1.5f * std::exp2(std::floor(std::log2(amax)));  // the largest value of the block
    for (size_t i = b; i < b + 32; ++i) {
      err += double(x[i] - y[i]) * (x[i] - y[i]), norm += double(x[i]) * x[i];
      // within half the widest step (8 to 12 in units of top / 12) where unclipped, else the clip
      EXPECT_LE(std::fabs(x[i] - y[i]), std::max(top / 6, std::fabs(x[i]) - top) * 1.0001f) << i;
    }
  }
  const double rel = std::sqrt(err / norm);
  std::printf("[quantize] MXFP4 round trip: rms error / rms value %.4f\n", rel);
  EXPECT_LE(rel, 0.14);
  EXPECT_GT(rel, 0.05) << "suspiciously exact for a 4-bit format";
}

}  // namespace
}  // namespace autoglm
