// autoglm quantize's mixes against the files llama-quantize 2026-09 writes for the same input
// (tests/data/quant_mix_reference.json, made by bench/quant_mix_reference.sh): the same count of
// tensors of each type, and sizes within 1%; and the rules themselves on a dense model.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "autoglm/model_tools.h"
#include "formats/gguf.h"
#include "model/quant_mix.h"
#include "test_util.h"

namespace autoglm {
namespace {

// "F32 x 33, Q4_K x 97, Q6_K x 17": as autoglm info prints a file's weight types.
std::string type_counts(const GgufFile& file) {
  std::map<std::string, int> counts;
  for (const auto& t : file.tensors()) ++counts[std::string(dtype_name(t.type))];
  std::string s;
  for (const auto& [name, n] : counts) s += (s.empty() ? "" : ", ") + name + " x " + std::to_string(n);
  return s;
}

std::string model_for(const std::string& tag) {
  const std::string path = test::temp_path("mix-" + tag + ".gguf");
  if (std::filesystem::exists(path)) return path;
  RandomModelOptions o;
  o.type = "f32";
  o.arch = tag == "llama16" ? "llama" : tag;
  if (tag == "llama16") o.n_layer = 16;
  EXPECT_TRUE(write_random_model(o, path).is_ok()) << tag;
  return path;
}

// An importance matrix of the model (its values do not matter to the types chosen: that one exists does).
std::string imatrix_for(const std::string& tag) {
  const std::string path = test::temp_path("mix-" + tag + ".imatrix.gguf");
  if (std::filesystem::exists(path)) return path;
  ImatrixOptions o;
  o.n_ctx = 128;
  o.max_chunks = 2;
  o.threads = 2;
  const auto text = test::read_file(std::string(AUTOGLM_SOURCE_DIR) + "/tests/data/stories_ppl.txt");
  EXPECT_TRUE(compute_imatrix(model_for(tag), text, path, o).is_ok()) << tag;
  return path;
}

TEST(QuantMix, EveryMixGivesLlamaQuantizesTypesAndSize) {
  const auto reference =
      nlohmann::json::parse(test::read_file(std::string(AUTOGLM_SOURCE_DIR) + "/tests/data/quant_mix_reference.json"));
  ASSERT_GE(reference.size(), 70u);
  for (const auto& [key, want] : reference.items()) {
    // "llama16 Q4_K_M", or "llama16 IQ2_M imatrix" for a mix quantized with an importance matrix.
    std::istringstream words(key);
    std::string tag, mix, with;
    words >> tag >> mix >> with;
    const std::string out = test::temp_path("mix-out.gguf");
    QuantizeModelOptions q;
    q.type = mix;
    if (with == "imatrix") q.imatrix = imatrix_for(tag);
    q.threads = 2;
    auto report = quantize_model(model_for(tag), out, q);
    ASSERT_TRUE(report.is_ok()) << key << ": " << report.status().message();
    EXPECT_EQ(report->mix, mix) << key;
    auto file = GgufFile::open(out);
    ASSERT_TRUE(file.is_ok()) << file.status().message();
    EXPECT_EQ(type_counts(**file), want["types"].get<std::string>()) << key;
    const double bytes = double(std::filesystem::file_size(out)), theirs = want["bytes"].get<double>();
    EXPECT_NEAR(bytes / theirs, 1.0, 0.01) << key << ": " << bytes << " bytes, llama-quantize " << theirs;
    EXPECT_EQ((*file)->get_int("general.file_type"), int64_t(quant_mix_info(*quant_mix_from_name(mix)).file_type));
  }
  for (const char* tag : {"llama16", "qwen3moe", "glm4moe", "deepseek2"})
    std::filesystem::remove(test::temp_path(std::string("mix-") + tag + ".gguf"));
  std::filesystem::remove(test::temp_path("mix-llama16.imatrix.gguf"));
  std::filesystem::remove(test::temp_path("mix-out.gguf"));
}

// Q4_K_M's value projections: Q6_K in the first and last eighth of the layers and every third
// between (16 layers: 0 1 4 7 10 13 14 15), Q4_K elsewhere; the output at Q6_K.
TEST(QuantMix, Q4KMGivesMoreBitsToEveryThirdLayer) {
  auto file = GgufFile::open(model_for("llama16"));
  ASSERT_TRUE(file.is_ok());
  auto plan = plan_quant_mix(**file, QuantMix::kQ4_K_M, {});
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  for (int layer = 0; layer < 16; ++layer) {
    const bool more = layer < 2 || layer >= 14 || (layer - 2) % 3 == 2;
    const DType want = more ? DType::Q6_K : DType::Q4_K;
    for (const char* kind : {"attn_v", "ffn_down"})
      EXPECT_EQ(plan->at("blk." + std::to_string(layer) + "." + kind + ".weight").type, want) << kind << " " << layer;
    EXPECT_EQ(plan->at("blk." + std::to_string(layer) + ".attn_q.weight").type, DType::Q4_K);
  }
  EXPECT_EQ(plan->at("output.weight").type, DType::Q6_K);
  EXPECT_EQ(plan->at("token_embd.weight").type, DType::Q4_K);
  EXPECT_EQ(plan->count("blk.0.attn_norm.weight"), 0u) << "norms are not quantized";
}

// With an importance matrix Q4_0 gives the first eighth of the down projections Q4_1, and
// IQ4_XS keeps them (without one: Q5_K), as llama-quantize does.
TEST(QuantMix, SomeChoicesDependOnAnImatrix) {
  auto file = GgufFile::open(model_for("llama16"));
  ASSERT_TRUE(file.is_ok());
  MixChoices with;
  with.has_imatrix = true;
  auto q4_0 = plan_quant_mix(**file, QuantMix::kQ4_0, with);
  ASSERT_TRUE(q4_0.is_ok());
  EXPECT_EQ(q4_0->at("blk.1.ffn_down.weight").type, DType::Q4_1);
  EXPECT_EQ(q4_0->at("blk.2.ffn_down.weight").type, DType::Q4_0);
  auto iq4 = plan_quant_mix(**file, QuantMix::kIQ4_XS, with), iq4_plain = plan_quant_mix(**file, QuantMix::kIQ4_XS, {});
  ASSERT_TRUE(iq4.is_ok() && iq4_plain.is_ok());
  EXPECT_EQ(iq4->at("blk.0.ffn_down.weight").type, DType::IQ4_XS);
  EXPECT_EQ(iq4_plain->at("blk.0.ffn_down.weight").type, DType::Q5_K);
}

// As llama-quantize: --output-tensor-type and --token-embedding-type name those tensors' types
// with --pure too, --leave-output-tensor copies output.weight, and --pure's TYPE may be a mix,
// standing for the type its rules start from.
TEST(QuantMix, PureTakesTheTensorOverridesAndMixNames) {
  const std::string out = test::temp_path("pure-overrides.gguf");
  QuantizeModelOptions q;
  q.type = "IQ3_M";  // a mix: its start, IQ3_S
  q.pure = true;
  q.output_tensor_type = "q6_k";
  q.token_embedding_type = "q8_0";
  q.threads = 2;
  auto report = quantize_model(model_for("llama16"), out, q);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  auto file = GgufFile::open(out);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_EQ((*file)->find_tensor("output.weight")->type, DType::Q6_K);
  EXPECT_EQ((*file)->find_tensor("token_embd.weight")->type, DType::Q8_0);
  EXPECT_EQ((*file)->find_tensor("blk.0.attn_q.weight")->type, DType::IQ3_S);

  q.type = "q4_k";
  q.output_tensor_type.reset();
  q.leave_output_tensor = true;
  report = quantize_model(model_for("llama16"), out, q);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  file = GgufFile::open(out);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_EQ((*file)->find_tensor("output.weight")->type, DType::F32) << "copied as the input has it";
  EXPECT_EQ((*file)->find_tensor("blk.0.ffn_up.weight")->type, DType::Q4_K);
  std::filesystem::remove(out);
}

TEST(QuantMix, NamesAliasesAndTheImatrixTheLowestMixesNeed) {
  EXPECT_EQ(quant_mix_from_name("q4_k"), QuantMix::kQ4_K_M);
  EXPECT_EQ(quant_mix_from_name("Q3_K"), QuantMix::kQ3_K_M);
  EXPECT_EQ(quant_mix_from_name("iq2_m"), QuantMix::kIQ2_M);
  EXPECT_FALSE(quant_mix_from_name("q4_k_x").has_value());
  EXPECT_EQ(quant_mix_info(QuantMix::kIQ2_S).base, DType::IQ2_XS);  // as llama-quantize has it
  QuantizeModelOptions q;
  q.type = "IQ2_XXS";
  auto refused = quantize_model(model_for("llama16"), test::temp_path("mix-iq2.gguf"), q);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("--imatrix"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("IQ2_XXS"), std::string::npos) << refused.status().message();
  // One type for every matrix (--pure) is held to the same rule, tensor by tensor, as in
  // llama-quantize; the embedding and output are exempt, and Q2_K needs none outside Q2_K_S.
  for (const char* type : {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_S", "IQ1_M", "IQ3_XXS"}) {
    QuantizeModelOptions pure;
    pure.type = type;
    pure.pure = true;
    auto bare = quantize_model(model_for("llama16"), test::temp_path("pure-bare.gguf"), pure);
    ASSERT_FALSE(bare.is_ok()) << type;
    const std::string& why = bare.status().message();
    EXPECT_NE(why.find("--imatrix"), std::string::npos) << why;
    EXPECT_NE(why.find(std::string("would be ") + type), std::string::npos) << why;
    EXPECT_NE(why.find("blk.0."), std::string::npos) << "names a block's tensor, not the exempt embedding: " << why;
  }
  EXPECT_FALSE(tensor_needs_imatrix(DType::IQ2_XXS, std::nullopt, "token_embd.weight"));
  EXPECT_FALSE(tensor_needs_imatrix(DType::IQ1_S, std::nullopt, "output.weight"));
  EXPECT_FALSE(tensor_needs_imatrix(DType::Q2_K, std::nullopt, "blk.0.ffn_down.weight"));
  EXPECT_FALSE(tensor_needs_imatrix(DType::Q2_K, QuantMix::kQ2_K, "blk.0.ffn_down.weight"));
  EXPECT_TRUE(tensor_needs_imatrix(DType::Q2_K, QuantMix::kQ2_K_S, "blk.0.ffn_down.weight"));
  EXPECT_FALSE(tensor_needs_imatrix(DType::IQ3_S, std::nullopt, "blk.0.ffn_down.weight"));
  QuantizeModelOptions q2k;
  q2k.type = "Q2_K";
  q2k.pure = true;
  auto plain = quantize_model(model_for("llama16"), test::temp_path("pure-q2k.gguf"), q2k);
  EXPECT_TRUE(plain.is_ok()) << plain.status().message();
  q2k.type = "Q2_K_S";  // the same type, in the file type that needs the matrix
  auto small = quantize_model(model_for("llama16"), test::temp_path("pure-q2k.gguf"), q2k);
  ASSERT_FALSE(small.is_ok());
  EXPECT_NE(small.status().message().find("would be Q2_K, which needs an importance matrix"), std::string::npos)
      << small.status().message();
}

}  // namespace
}  // namespace autoglm
