// Architectures with no reference engine at hand (Qwen3, GLM-4-0414, the mixture-of-experts
// families: Qwen2/3-MoE, Mixtral, GLM-4.5, DeepSeek-V2/V3, GLM-4.7-Flash, gpt-oss), Mistral's
// sliding window and the rope_scaling types, each as a small random Hugging Face folder
// written here, loaded by the engine and compared with a float64 forward pass written from
// the Hugging Face modelling code (hf_reference.h), and so is the GGUF `convert` writes.
// Also: config.json errors, the MoE metadata keys and tensor layouts llama.cpp expects.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/thread_pool.h"
#include "engine/embeddings.h"
#include "float_activations.h"
#include "formats/gguf.h"
#include "hf_folder_builder.h"
#include "hf_reference.h"
#include "kernels/ref/quants.h"
#include "model/convert.h"
#include "model/hf_checkpoint.h"
#include "model/model.h"
#include "model_test_util.h"
#include "test_util.h"
#include "tokenizer/hf_tokenizer.h"

namespace autoglm {
namespace {

using nlohmann::json;

json base_config(const std::string& arch, int64_t d, int64_t nh, int64_t nkv, int64_t head_dim) {
  return {{"architectures", {arch}},        {"hidden_size", d},
          {"num_attention_heads", nh},      {"num_key_value_heads", nkv},
          {"head_dim", head_dim},           {"intermediate_size", 40},
          {"num_hidden_layers", 2},         {"vocab_size", 96},
          {"rms_norm_eps", 1e-6},           {"rope_theta", 10000.0},
          {"max_position_embeddings", 256}, {"hidden_act", "silu"}};
}

std::vector<int32_t> prompt(size_t n) {
  std::vector<int32_t> t;
  for (size_t i = 0; i < n; ++i) t.push_back(int32_t((i * 37 + 11) % 96));
  return t;
}

// Engine logits (f32 KV) against the float64 reference at every position.
void expect_matches_reference(const std::string& dir, size_t n_tokens, double tolerance) {
  auto m = Model::load(dir);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const auto tokens = prompt(n_tokens);
  const auto mine = test::forward_all_positions(**m, tokens, DType::F32);
  const auto ref = test::HfReference(dir).forward(tokens);
  ASSERT_EQ(mine.size(), ref.size());
  double max_abs = 0, max_ref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(double(mine[i]) - ref[i]));
    max_ref = std::max(max_ref, std::fabs(ref[i]));
  }
  std::printf("[hf arch] %s: max_abs %.3g (logits up to %.3g)\n", dir.c_str(), max_abs, max_ref);
  EXPECT_GT(max_ref, 1.0);  // the model is not degenerate
  EXPECT_LE(max_abs, tolerance);

  // The GGUF `convert` writes (standard arch and tensor names) gives the same logits.
  ThreadPool pool(2);
  const std::string gguf = dir + ".gguf";
  auto report = convert_hf_folder(dir, gguf, DType::F32, pool);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  auto converted = Model::load(gguf);
  ASSERT_TRUE(converted.is_ok()) << converted.status().message();
  EXPECT_EQ((*converted)->spec().arch, (*m)->spec().arch);
  const auto from_gguf = test::forward_all_positions(**converted, tokens, DType::F32);
  double gguf_abs = 0;
  for (size_t i = 0; i < ref.size(); ++i) gguf_abs = std::max(gguf_abs, std::fabs(double(from_gguf[i]) - ref[i]));
  EXPECT_LE(gguf_abs, tolerance) << "converted GGUF of " << dir;
}

TEST(HfArchitectures, Qwen3MatchesFloat64Reference) {
  json c = base_config("Qwen3ForCausalLM", 32, 4, 2, 16);  // head_dim 16 != 32 / 4
  c["rope_theta"] = 1000000.0;
  FolderBuilder b(c, 11);
  b.add_decoder(/*biases=*/false, /*qk_norm=*/true, /*post_norms=*/false, /*fused_mlp=*/false);
  expect_matches_reference(b.write("qwen3-hf", false), 40, 2e-3);
}

TEST(HfArchitectures, Glm4MatchesFloat64Reference) {
  json c = base_config("Glm4ForCausalLM", 32, 4, 2, 16);
  c["attention_bias"] = true;
  c["partial_rotary_factor"] = 0.5;
  FolderBuilder b(c, 12);
  b.add_decoder(/*biases=*/true, /*qk_norm=*/false, /*post_norms=*/true, /*fused_mlp=*/true);
  expect_matches_reference(b.write("glm4-hf", /*bf16=*/true), 40, 2e-3);
}

TEST(HfArchitectures, MistralSlidingWindowMatchesFloat64Reference) {
  json c = base_config("MistralForCausalLM", 32, 4, 2, 8);
  c["sliding_window"] = 5;
  FolderBuilder b(c, 13);
  b.add_decoder(false, false, false, false);
  const std::string dir = b.write("mistral-hf", false);
  expect_matches_reference(dir, 40, 2e-3);
  auto m = Model::load(dir);
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ((*m)->spec().sliding_window, 5);
}

TEST(HfArchitectures, LlamaRopeScalingMatchesFloat64Reference) {
  for (const char* type : {"linear", "dynamic"}) {
    json c = base_config("LlamaForCausalLM", 32, 4, 4, 8);
    c["rope_scaling"] = {{"rope_type", type}, {"factor", 4.0}};
    FolderBuilder b(c, 14);
    b.add_decoder(false, false, false, false);
    expect_matches_reference(b.write(std::string("llama-") + type, false), 40, 2e-3);
  }
}

TEST(HfArchitectures, QuantizeAtLoadKeepsTheArgmaxClose) {
  json c = base_config("Qwen3ForCausalLM", 64, 4, 2, 16);
  c["intermediate_size"] = 128;
  FolderBuilder b(c, 15);
  b.add_decoder(false, true, false, false);
  const std::string dir = b.write("qwen3-q8", false);
  auto f32 = Model::load(dir);
  ModelLoadOptions quantized;
  quantized.quantize = DType::Q8_0;
  auto q8 = Model::load(dir, quantized);
  ASSERT_TRUE(f32.is_ok() && q8.is_ok());
  EXPECT_EQ((*q8)->weights().layers[0].wq.type, DType::Q8_0);
  const auto tokens = prompt(24);
  const auto a = test::forward_all_positions(**f32, tokens, DType::F32);
  const auto q = test::forward_all_positions(**q8, tokens, DType::F32);
  int agree = 0;
  for (size_t p = 0; p < tokens.size(); ++p) {
    const auto* ra = &a[p * 96];
    const auto* rq = &q[p * 96];
    agree += std::max_element(ra, ra + 96) - ra == std::max_element(rq, rq + 96) - rq;
  }
  EXPECT_GE(agree, 22) << "top-1 agreement of q8_0 at load with the f32 folder";
}

// config.json errors name the file and the field.
void expect_config_error(const json& config, const std::string& needle) {
  const std::string dir = test::temp_path("bad-config");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << config.dump();
  auto m = Model::load(dir);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("config.json"), std::string::npos) << m.status().message();
}

TEST(HfArchitectures, ConfigErrorsNameFileAndField) {
  const json good = base_config("LlamaForCausalLM", 32, 4, 4, 8);
  expect_config_error(json::array(), "expected a JSON object");
  json c = good;
  c.erase("architectures");
  expect_config_error(c, "'architectures'");
  c = good;
  c["architectures"] = {"GPT2LMHeadModel"};
  expect_config_error(c, "'GPT2LMHeadModel' is not supported");
  for (const char* listed : {"Glm4MoeForCausalLM", "Qwen3MoeForCausalLM", "GptOssForCausalLM", "DeepseekV3ForCausalLM",
                             "MixtralForCausalLM", "Qwen2MoeForCausalLM", "LlamaForCausalLM"})
    expect_config_error(c, listed);  // the error lists what is supported
  c = good;
  c.erase("hidden_size");
  expect_config_error(c, "missing field 'hidden_size'");
  c = good;
  c["num_hidden_layers"] = -2;
  expect_config_error(c, "'num_hidden_layers' must be a positive integer");
  c = good;
  c["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 4.0}};
  expect_config_error(c, "rope_scaling type 'longrope'");
  c = good;
  c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  expect_config_error(c, "yarn needs a positive 'original_max_position_embeddings'");
  c = good;
  c["rope_scaling"] = {{"rope_type", 5}, {"factor", 2.0}};
  expect_config_error(c, "wrong type");
  c = good;
  c["hidden_act"] = "gelu";
  expect_config_error(c, "hidden_act 'gelu'");
  // Not JSON at all.
  const std::string dir = test::temp_path("broken-config");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << "{\"hidden_size\": ";
  auto m = Model::load(dir);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("config.json: not valid JSON"), std::string::npos) << m.status().message();
}

TEST(HfArchitectures, MissingOrMisshapenTensorsNameTheTensor) {
  json c = base_config("LlamaForCausalLM", 32, 4, 4, 8);
  FolderBuilder b(c, 16);
  b.add_decoder(false, false, false, false);
  b.add("model.layers.1.mlp.down_proj.weight", {32, 39}, 0.1);  // intermediate_size is 40
  auto m = Model::load(b.write("misshapen", false));
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("blk.1.ffn_down.weight"), std::string::npos) << m.status().message();
}

// ---- Mixture-of-experts families and DeepSeek's latent attention. ----

json moe_config(const std::string& arch, int64_t n_layer) {
  json c = base_config(arch, 32, 4, 2, 16);
  c["num_hidden_layers"] = n_layer;
  c["num_experts_per_tok"] = 2;
  c["moe_intermediate_size"] = 16;
  return c;
}

// MLA: 4 heads of q/k 8 + 8 (nope + rope) and v 8, latent 16, q_lora_rank 24 (or none).
json mla_config(const std::string& arch, bool q_lora) {
  json c = moe_config(arch, 3);
  c.erase("head_dim");
  c["num_key_value_heads"] = 4;
  c["kv_lora_rank"] = 16;
  c["q_lora_rank"] = q_lora ? json(24) : json();
  c["qk_nope_head_dim"] = 8;
  c["qk_rope_head_dim"] = 8;
  c["v_head_dim"] = 8;
  c["n_routed_experts"] = 8;
  c["n_shared_experts"] = 1;
  c["first_k_dense_replace"] = 1;
  return c;
}

// Layers [0, first_dense) dense, the others MoE, then `nextn` NextN blocks (MoE too).
void add_moe_layers(FolderBuilder& b, const std::string& family, int64_t first_dense, int64_t nextn, bool mla,
                    bool biases, bool qk_norm) {
  b.add_globals();
  for (int64_t il = 0; il < b.n_layer() + nextn; ++il) {
    const std::string L = "model.layers." + std::to_string(il) + ".";
    if (mla)
      b.add_mla_attention(L);
    else
      b.add_attention(L, biases, qk_norm);
    if (il < first_dense)
      b.add_mlp(L + "mlp.", b.cfg("intermediate_size"));
    else
      b.add_moe(L, family);
    if (il >= b.n_layer()) b.add_nextn(L);
  }
}

TEST(HfArchitectures, Qwen3MoeMatchesFloat64Reference) {
  json c = moe_config("Qwen3MoeForCausalLM", 2);
  c["num_experts"] = 8;
  c["norm_topk_prob"] = true;
  c["rope_theta"] = 1000000.0;
  FolderBuilder b(c, 21);
  add_moe_layers(b, "qwen3", 0, 0, false, false, true);
  expect_matches_reference(b.write("qwen3moe-hf", false), 40, 2e-3);
}

// Folders saved by transformers 5 hold each layer's experts stacked: gate_up_proj
// [experts, 2 x ff, hidden] and down_proj [experts, hidden, ff], no ".weight".
TEST(HfArchitectures, StackedExpertsOfTransformers5MatchFloat64Reference) {
  json c = moe_config("Qwen3MoeForCausalLM", 2);
  c["num_experts"] = 8;
  c["norm_topk_prob"] = true;
  FolderBuilder b(c, 35);
  b.add_globals();
  for (int64_t il = 0; il < 2; ++il) {
    const std::string L = "model.layers." + std::to_string(il) + ".";
    b.add_attention(L, false, true);
    b.add(L + "mlp.gate.weight", {8, 32}, 2.0 / std::sqrt(32.0));
    b.add(L + "mlp.experts.gate_up_proj", {8, 32, 32}, 1.0 / std::sqrt(32.0));
    b.add(L + "mlp.experts.down_proj", {8, 32, 16}, 3.0 / std::sqrt(16.0));
  }
  expect_matches_reference(b.write("qwen3moe-stacked-hf", true), 40, 2e-3);
}

TEST(HfArchitectures, Qwen2MoeMatchesFloat64Reference) {
  json c = moe_config("Qwen2MoeForCausalLM", 2);
  c["head_dim"] = 8;  // llama.cpp's qwen2moe knows no other head size than hidden_size / heads
  c["num_experts"] = 8;
  c["num_experts_per_tok"] = 3;
  c["norm_topk_prob"] = false;
  c["shared_expert_intermediate_size"] = 24;
  FolderBuilder b(c, 22);
  add_moe_layers(b, "qwen2", 0, 0, false, true, false);
  expect_matches_reference(b.write("qwen2moe-hf", false), 40, 2e-3);
}

TEST(HfArchitectures, MixtralMatchesFloat64Reference) {
  json c = moe_config("MixtralForCausalLM", 2);
  c.erase("moe_intermediate_size");
  c["num_local_experts"] = 4;
  c["intermediate_size"] = 24;
  FolderBuilder b(c, 23);
  add_moe_layers(b, "mixtral", 0, 0, false, false, false);
  const std::string dir = b.write("mixtral-hf", false);
  expect_matches_reference(dir, 40, 2e-3);
  auto m = Model::load(dir);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)->spec().arch, "llama");
}

// GLM-4.5: sigmoid router with selection bias, a shared expert, a leading dense layer, partial
// NeoX rope, q/k/v biases and a NextN block that is kept but not run.
// GLM-4.5's router and layer plan: 8 experts, one shared, a leading dense layer, a NextN block.
json glm4moe_config() {
  json c = moe_config("Glm4MoeForCausalLM", 3);
  c["n_routed_experts"] = 8;
  c["n_shared_experts"] = 1;
  c["first_k_dense_replace"] = 1;
  c["routed_scaling_factor"] = 2.5;
  c["norm_topk_prob"] = true;
  c["num_nextn_predict_layers"] = 1;
  return c;
}

TEST(HfArchitectures, Glm4MoeMatchesFloat64Reference) {
  json c = glm4moe_config();
  c["n_group"] = 1;
  c["topk_group"] = 1;
  c["attention_bias"] = true;
  c["partial_rotary_factor"] = 0.5;
  FolderBuilder b(c, 24);
  add_moe_layers(b, "deepseek", 1, 1, false, true, false);
  expect_matches_reference(b.write("glm4moe-hf", /*bf16=*/true), 40, 2e-3);
}

// DeepSeek-V3: latent attention with q_lora, sigmoid router with bias and grouped top-k.
TEST(HfArchitectures, DeepseekV3MatchesFloat64Reference) {
  json c = mla_config("DeepseekV3ForCausalLM", true);
  c["n_group"] = 4;
  c["topk_group"] = 2;
  c["routed_scaling_factor"] = 1.8;
  c["norm_topk_prob"] = true;
  c["scoring_func"] = "sigmoid";
  c["topk_method"] = "noaux_tc";
  c["num_nextn_predict_layers"] = 1;  // its layer is in the folder and dropped, as llama.cpp's converter does
  FolderBuilder b(c, 25);
  add_moe_layers(b, "deepseek", 1, 1, true, false, false);
  expect_matches_reference(b.write("deepseek3-hf", false), 40, 2e-3);
}

// DeepSeek-V3's YaRN (factor 40, mscale = mscale_all_dim = 1): the rope part's frequencies
// ramp, and the attention logits scale by (0.1 ln 40 + 1)^2 (llama.cpp: yarn_log_multiplier).
TEST(HfArchitectures, DeepseekV3YarnMatchesFloat64Reference) {
  json c = mla_config("DeepseekV3ForCausalLM", true);
  c["n_group"] = 4;
  c["topk_group"] = 2;
  c["routed_scaling_factor"] = 2.5;
  c["norm_topk_prob"] = true;
  c["max_position_embeddings"] = 163840;
  c["rope_scaling"] = {{"type", "yarn"},       {"factor", 40.0},   {"original_max_position_embeddings", 4096},
                       {"beta_fast", 32.0},    {"beta_slow", 1.0}, {"mscale", 1.0},
                       {"mscale_all_dim", 1.0}};
  FolderBuilder b(c, 34);
  add_moe_layers(b, "deepseek", 1, 0, true, false, false);
  expect_matches_reference(b.write("deepseek3-yarn-hf", false), 40, 2e-3);
}

// DeepSeek-V2(-Lite): no q_lora, softmax router without renormalization.
TEST(HfArchitectures, DeepseekV2MatchesFloat64Reference) {
  json c = mla_config("DeepseekV2ForCausalLM", false);
  c["n_shared_experts"] = 2;
  c["routed_scaling_factor"] = 1.5;
  c["norm_topk_prob"] = false;
  c["scoring_func"] = "softmax";
  c["topk_method"] = "greedy";
  c["n_group"] = 1;
  c["topk_group"] = 1;
  FolderBuilder b(c, 26);
  add_moe_layers(b, "deepseek", 1, 0, true, false, false);
  const std::string dir = b.write("deepseek2-hf", false);
  // DeepSeek-V2 has no selection bias.
  expect_matches_reference(dir, 40, 2e-3);
}

// GLM-4.7-Flash runs as deepseek2; with rope_interleave false its rope rows are permuted.
TEST(HfArchitectures, Glm4MoeLiteMatchesFloat64Reference) {
  for (const bool interleave : {true, false}) {
    SCOPED_TRACE(interleave ? "rope_interleave" : "rotate_half");
    json c = mla_config("Glm4MoeLiteForCausalLM", true);
    c["routed_scaling_factor"] = 1.8;
    c["norm_topk_prob"] = true;
    c["n_group"] = 1;
    c["topk_group"] = 1;
    c["num_nextn_predict_layers"] = 1;
    c["rope_interleave"] = interleave;
    FolderBuilder b(c, 27);
    add_moe_layers(b, "deepseek", 1, 1, true, false, false);
    const std::string dir = b.write(std::string("glm4moelite-hf-") + (interleave ? "i" : "h"), false);
    expect_matches_reference(dir, 40, 2e-3);
    auto m = Model::load(dir);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    EXPECT_EQ((*m)->spec().arch, "deepseek2");
  }
}

// gpt-oss: attention sinks and biases, a window on even layers, YaRN, a biased router with a
// softmax over the chosen, clamped SwiGLU experts with biases; experts in MXFP4 (as released)
// or dense (dequantized folders, [experts, in, out]).
json gpt_oss_config() {
  json c = base_config("GptOssForCausalLM", 64, 4, 2, 16);
  c["intermediate_size"] = 32;
  c["num_hidden_layers"] = 2;
  c["num_local_experts"] = 4;
  c["num_experts_per_tok"] = 2;
  c["attention_bias"] = true;
  c["sliding_window"] = 5;
  c["layer_types"] = {"sliding_attention", "full_attention"};
  c["swiglu_limit"] = 7.0;
  c["rope_theta"] = 150000.0;
  c["max_position_embeddings"] = 131072;
  c["rms_norm_eps"] = 1e-5;
  c["rope_scaling"] = {{"rope_type", "yarn"},
                       {"factor", 32.0},
                       {"original_max_position_embeddings", 4096},
                       {"beta_fast", 32.0},
                       {"beta_slow", 1.0}};
  return c;
}

void add_gpt_oss_layers(FolderBuilder& b, bool mxfp4) {
  const int64_t d = b.cfg("hidden_size"), nh = b.cfg("num_attention_heads"), ff = b.cfg("intermediate_size");
  const int64_t n = b.cfg("num_local_experts");
  b.add_globals();
  for (int64_t il = 0; il < b.n_layer(); ++il) {
    const std::string L = "model.layers." + std::to_string(il) + ".";
    b.add_attention(L, true, false);
    b.add(L + "self_attn.o_proj.bias", {d}, 0.3);
    b.add(L + "self_attn.sinks", {nh}, 1.0);
    b.add(L + "mlp.router.weight", {n, d}, 2.0 / std::sqrt(double(d)));
    b.add(L + "mlp.router.bias", {n}, 0.3);
    const std::string E = L + "mlp.experts.";
    if (mxfp4) {
      b.add_u8(E + "gate_up_proj_blocks", {n, 2 * ff, d / 32, 16}, 0, 255);
      b.add_u8(E + "gate_up_proj_scales", {n, 2 * ff, d / 32}, 122, 124);
      b.add_u8(E + "down_proj_blocks", {n, d, ff / 32, 16}, 0, 255);
      b.add_u8(E + "down_proj_scales", {n, d, ff / 32}, 122, 124);
    } else {
      b.add(E + "gate_up_proj", {n, d, 2 * ff}, 1.5 / std::sqrt(double(d)));
      b.add(E + "down_proj", {n, ff, d}, 2.0 / std::sqrt(double(ff)));
    }
    b.add(E + "gate_up_proj_bias", {n, 2 * ff}, 0.3);
    b.add(E + "down_proj_bias", {n, d}, 0.3);
  }
}

// MXFP4 experts: the engine, as llama.cpp, multiplies them with activations quantized to 8-bit
// blocks, so the forward pass is compared loosely (per-row error against the row's scale, and
// the argmax); the mapping itself is checked exactly: each expert matrix in the GGUF decodes to
// the values transformers dequantizes the *_blocks/*_scales to.
void expect_mxfp4_experts_decode_exactly(const std::string& dir) {
  auto f = open_hf_checkpoint(dir);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  auto hf = SafetensorsCheckpoint::open_folder(dir);
  ASSERT_TRUE(hf.is_ok());
  std::map<std::string, const SafetensorsTensor*> by_name;
  for (const auto& file : (*hf)->files())
    for (const auto& t : file->tensors()) by_name[t.name] = &t;
  static const float kFp4[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  int checked = 0;
  for (const auto& [proj, gguf, first, step] :
       std::vector<std::tuple<std::string, std::string, int, int>>{{"gate_up_proj", "ffn_gate_exps", 0, 2},
                                                                   {"gate_up_proj", "ffn_up_exps", 1, 2},
                                                                   {"down_proj", "ffn_down_exps", 0, 1}}) {
    const SafetensorsTensor& blocks = *by_name.at("model.layers.1.mlp.experts." + proj + "_blocks");
    const SafetensorsTensor& scales = *by_name.at("model.layers.1.mlp.experts." + proj + "_scales");
    const GgufTensorInfo* g = (*f)->find_tensor("blk.1." + gguf + ".weight");
    ASSERT_NE(g, nullptr) << gguf;
    ASSERT_EQ(g->type, DType::MXFP4);
    const int64_t n = blocks.shape[0], rows = blocks.shape[1], nb = blocks.shape[2], cols = nb * 32;
    ASSERT_EQ(g->dims, (std::vector<int64_t>{cols, rows / step, n}));
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t e = 0; e < n; ++e)
      for (int64_t r = 0; r < rows / step; ++r) {
        ref::dequantize_row(DType::MXFP4, g->data + (e * rows / step + r) * nb * 17, row.data(), cols);
        const int64_t hr = first + r * step;
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t at = (e * rows + hr) * nb + c / 32;
          const uint8_t byte = blocks.data[at * 16 + (c % 32) / 2];
          const float want = kFp4[c % 2 == 0 ? byte & 0x0F : byte >> 4] * std::ldexp(1.0f, int(scales.data[at]) - 127);
          ASSERT_EQ(row[size_t(c)], want) << gguf << " expert " << e << " row " << r << " col " << c;
          ++checked;
        }
      }
  }
  EXPECT_GT(checked, 0);
}

// The largest error of a row against the row's largest reference logit, over all rows, and
// how many rows agree on the argmax.
std::pair<double, int> row_errors(const std::vector<float>& mine, const std::vector<double>& ref, size_t n_rows) {
  const size_t vocab = ref.size() / n_rows;
  double worst = 0;
  int agree = 0;
  for (size_t p = 0; p < n_rows; ++p) {
    double err = 0, scale = 0;
    for (size_t i = p * vocab; i < (p + 1) * vocab; ++i) {
      err = std::max(err, std::fabs(double(mine[i]) - ref[i]));
      scale = std::max(scale, std::fabs(ref[i]));
    }
    worst = std::max(worst, err / scale);
    agree += std::max_element(&mine[p * vocab], &mine[(p + 1) * vocab]) - &mine[p * vocab] ==
             std::max_element(&ref[p * vocab], &ref[(p + 1) * vocab]) - &ref[p * vocab];
  }
  return {worst, agree};
}

// Against the float64 reference (`rel` of each row's scale, `min_agree` argmaxes) and against
// it with 8-bit activations into the MXFP4 experts, as the engine computes (`q8_rel`).
void expect_close_to_reference(const std::string& dir, size_t n_tokens, double rel, int min_agree, double q8_rel) {
  auto m = Model::load(dir);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const auto tokens = prompt(n_tokens);
  const auto mine = test::forward_all_positions(**m, tokens, DType::F32);
  test::HfReference reference(dir);
  const auto ref = reference.forward(tokens);
  reference.quantize_mxfp4_activations(true);
  const auto ref_q8 = reference.forward(tokens);
  ASSERT_EQ(mine.size(), ref.size());
  const auto [worst, agree] = row_errors(mine, ref, n_tokens);
  const auto [worst_q8, agree_q8] = row_errors(mine, ref_q8, n_tokens);
  std::printf("[hf arch] %s: worst row error %.3g (%.3g with 8-bit MXFP4 activations), top-1 %d/%zu (%d)\n",
              dir.c_str(), worst, worst_q8, agree, n_tokens, agree_q8);
  EXPECT_LE(worst, rel);
  EXPECT_GE(agree, min_agree);
  EXPECT_LE(worst_q8, q8_rel);
}

TEST(HfArchitectures, GptOssMxfp4ExpertsMatchTransformers) {
  json c = gpt_oss_config();
  FolderBuilder b(c, 29);
  add_gpt_oss_layers(b, true);
  const std::string dir = b.write("gpt-oss-hf-mxfp4", false);
  expect_mxfp4_experts_decode_exactly(dir);
  expect_close_to_reference(dir, 40, 0.1, 36, 0.02);
}

TEST(HfArchitectures, GptOssMatchesFloat64Reference) {
  for (const bool mxfp4 : {false}) {
    json c = gpt_oss_config();
    FolderBuilder b(c, 28);
    add_gpt_oss_layers(b, mxfp4);
    expect_matches_reference(b.write(std::string("gpt-oss-hf-") + (mxfp4 ? "mxfp4" : "dense"), !mxfp4), 40, 2e-3);
  }
}

// What the folder reader presents (and `convert` writes): llama.cpp's metadata keys, the
// stacked experts and the split kv_b_proj, independent of any forward pass.
const GgufTensorInfo* tensor(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  return t;
}

float f32_at(const GgufTensorInfo& t, int64_t i) {
  float v;
  std::memcpy(&v, t.data + 4 * i, 4);
  return v;
}

TEST(HfMoeMapping, Glm4MoeKeysAndStackedExperts) {
  FolderBuilder b(glm4moe_config(), 31);
  add_moe_layers(b, "deepseek", 1, 1, false, true, false);
  const std::string dir = b.write("glm4moe-map", false);
  auto f = open_hf_checkpoint(dir);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  const GgufFile& g = **f;
  EXPECT_EQ(g.get_string("general.architecture").value_or(""), "glm4moe");
  EXPECT_EQ(g.get_int("glm4moe.block_count").value_or(0), 4);
  EXPECT_EQ(g.get_int("glm4moe.nextn_predict_layers").value_or(0), 1);
  EXPECT_EQ(g.get_int("glm4moe.expert_count").value_or(0), 8);
  EXPECT_EQ(g.get_int("glm4moe.expert_used_count").value_or(0), 2);
  EXPECT_EQ(g.get_int("glm4moe.expert_feed_forward_length").value_or(0), 16);
  EXPECT_EQ(g.get_int("glm4moe.expert_shared_count").value_or(0), 1);
  EXPECT_EQ(g.get_int("glm4moe.leading_dense_block_count").value_or(0), 1);
  EXPECT_EQ(g.get_int("glm4moe.expert_gating_func").value_or(0), 2);
  EXPECT_EQ(g.get_int("glm4moe.rope.dimension_count").value_or(0), 8);
  EXPECT_NEAR(g.get_float("glm4moe.expert_weights_scale").value_or(0), 2.5, 1e-6);
  EXPECT_TRUE(g.get_bool("glm4moe.expert_weights_norm").value_or(false));
  const auto* gate = tensor(g, "blk.1.ffn_gate_exps.weight");
  const auto* down = tensor(g, "blk.1.ffn_down_exps.weight");
  ASSERT_TRUE(gate && down);
  EXPECT_EQ(gate->dims, (std::vector<int64_t>{32, 16, 8}));
  EXPECT_EQ(down->dims, (std::vector<int64_t>{16, 32, 8}));
  // Expert 5's gate_proj row 3 column 7 sits at [7, 3, 5].
  auto ref = SafetensorsCheckpoint::open_folder(dir);
  ASSERT_TRUE(ref.is_ok());
  const SafetensorsTensor* e5 = nullptr;
  for (const auto& file : (*ref)->files())
    for (const auto& t : file->tensors())
      if (t.name == "model.layers.1.mlp.experts.5.gate_proj.weight") e5 = &t;
  ASSERT_NE(e5, nullptr);
  float want;
  std::memcpy(&want, e5->data + 4 * (3 * 32 + 7), 4);
  EXPECT_EQ(f32_at(*gate, (5 * 16 + 3) * 32 + 7), want);
  EXPECT_NE(g.find_tensor("blk.3.nextn.eh_proj.weight"), nullptr);
  EXPECT_NE(g.find_tensor("blk.3.ffn_up_exps.weight"), nullptr);
  EXPECT_NE(g.find_tensor("blk.1.exp_probs_b.bias"), nullptr);
  EXPECT_NE(g.find_tensor("blk.0.ffn_gate.weight"), nullptr);
  EXPECT_NE(g.find_tensor("blk.1.post_attention_norm.weight"), nullptr);
  EXPECT_EQ(g.find_tensor("blk.1.ffn_norm.weight"), nullptr);
}

TEST(HfMoeMapping, DeepseekKvBSplitAsLlamaCpp) {
  json c = mla_config("DeepseekV3ForCausalLM", true);
  c["num_nextn_predict_layers"] = 1;
  FolderBuilder b(c, 32);
  add_moe_layers(b, "deepseek", 1, 1, true, false, false);
  const std::string dir = b.write("deepseek3-map", false);
  auto f = open_hf_checkpoint(dir);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  const GgufFile& g = **f;
  EXPECT_EQ(g.get_string("general.architecture").value_or(""), "deepseek2");
  EXPECT_EQ(g.get_int("deepseek2.block_count").value_or(0), 3);  // the NextN layer is dropped
  EXPECT_EQ(g.find_tensor("blk.3.attn_norm.weight"), nullptr);
  EXPECT_EQ(g.get_int("deepseek2.attention.head_count_kv").value_or(0), 1);
  EXPECT_EQ(g.get_int("deepseek2.attention.key_length").value_or(0), 16 + 8);
  EXPECT_EQ(g.get_int("deepseek2.attention.value_length").value_or(0), 16);
  EXPECT_EQ(g.get_int("deepseek2.attention.key_length_mla").value_or(0), 16);
  EXPECT_EQ(g.get_int("deepseek2.attention.value_length_mla").value_or(0), 8);
  EXPECT_EQ(g.get_int("deepseek2.attention.q_lora_rank").value_or(0), 24);
  EXPECT_EQ(g.get_int("deepseek2.attention.kv_lora_rank").value_or(0), 16);
  EXPECT_EQ(g.get_int("deepseek2.rope.dimension_count").value_or(0), 8);
  EXPECT_EQ(g.get_int("deepseek2.leading_dense_block_count").value_or(-1), 1);
  const auto* kb = tensor(g, "blk.0.attn_k_b.weight");
  const auto* vb = tensor(g, "blk.0.attn_v_b.weight");
  ASSERT_TRUE(kb && vb);
  EXPECT_EQ(kb->dims, (std::vector<int64_t>{8, 16, 4}));
  EXPECT_EQ(vb->dims, (std::vector<int64_t>{16, 8, 4}));
  EXPECT_EQ(g.find_tensor("blk.0.attn_kv_b.weight"), nullptr);
  auto ref = SafetensorsCheckpoint::open_folder(dir);
  ASSERT_TRUE(ref.is_ok());
  const SafetensorsTensor* kv_b = nullptr;
  for (const auto& file : (*ref)->files())
    for (const auto& t : file->tensors())
      if (t.name == "model.layers.0.self_attn.kv_b_proj.weight") kv_b = &t;
  ASSERT_NE(kv_b, nullptr);
  auto at = [&](int64_t row, int64_t col) {
    float v;
    std::memcpy(&v, kv_b->data + 4 * (row * 16 + col), 4);
    return v;
  };
  // Head 2: k_nope row j = kv_b row 2*16 + j; v row i = kv_b row 2*16 + 8 + i.
  for (int64_t j = 0; j < 8; ++j)
    for (int64_t l = 0; l < 16; ++l) {
      EXPECT_EQ(f32_at(*kb, (2 * 16 + l) * 8 + j), at(2 * 16 + j, l));
      EXPECT_EQ(f32_at(*vb, (2 * 8 + j) * 16 + l), at(2 * 16 + 8 + j, l));
    }
}

TEST(HfMoeMapping, MissingExpertNamesTheTensor) {
  json c = moe_config("Qwen3MoeForCausalLM", 2);
  c["num_experts"] = 8;
  FolderBuilder b(c, 33);
  add_moe_layers(b, "qwen3", 0, 0, false, false, true);
  const std::string dir = b.write("qwen3moe-missing", false);
  c["num_experts"] = 9;  // the folder has 8
  std::ofstream(dir + "/config.json") << c.dump();
  auto f = open_hf_checkpoint(dir);
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("expert 8 of blk."), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("_exps.weight"), std::string::npos) << f.status().message();
}

}  // namespace
}  // namespace autoglm

namespace autoglm {
namespace {

// Embeddings (last-token and mean pooling, normalised) against the float64 reference's final
// hidden states, with inputs split across batches of 8 tokens. (The reference does not model
// llama3-tiny's rope scaling; the golden logits cover that folder.)
TEST(HfEmbeddings, MatchTheFloat64HiddenStates) {
  for (const char* folder : {"models/hf/qwen2-tiny"}) {
    AUTOGLM_REQUIRE_SHARED(std::string(folder) + "/config.json");
    SCOPED_TRACE(folder);
    const std::string dir = test::shared_path(folder);
    auto model = Model::load(dir);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    ThreadPool pool(2);
    ModelRunner runner(**model, pool);
    const test::HfReference reference(dir);
    const int64_t d = (*model)->spec().n_embd;
    for (const Pooling pooling : {Pooling::kLast, Pooling::kMean}) {
      EmbeddingJob job;
      job.pooling = pooling;
      job.inputs = {prompt(7), prompt(23), prompt(1)};
      auto got = compute_embeddings(runner, (*model)->spec(), DType::F32, job, 8);
      ASSERT_TRUE(got.is_ok()) << got.status().message();
      ASSERT_EQ(got->size(), 3u);
      for (size_t i = 0; i < job.inputs.size(); ++i) {
        std::vector<double> hidden;
        reference.forward(job.inputs[i], &hidden);
        const size_t n = job.inputs[i].size();
        std::vector<double> want(size_t(d), 0.0);
        for (size_t p = pooling == Pooling::kLast ? n - 1 : 0; p < n; ++p)
          for (int64_t j = 0; j < d; ++j) want[size_t(j)] += hidden[p * size_t(d) + size_t(j)];
        double norm = 0;
        for (double v : want) norm += v * v;
        norm = std::sqrt(norm);
        double max_abs = 0, length = 0;
        for (int64_t j = 0; j < d; ++j) {
          max_abs = std::max(max_abs, std::fabs(double((*got)[i][size_t(j)]) - want[size_t(j)] / norm));
          length += double((*got)[i][size_t(j)]) * (*got)[i][size_t(j)];
        }
        EXPECT_LE(max_abs, 1e-4) << "input " << i << " pooling " << int(pooling);
        EXPECT_NEAR(length, 1.0, 1e-5);
      }
    }
  }
}

// `autoglm convert` writes as many tokens as the embedding has rows (the Qwen and GLM folders
// have 151669 tokens for 151936 and 151680 rows): llama.cpp refuses the file otherwise.
TEST(HfConvert, VocabularyIsPaddedToTheEmbeddingRows) {
  for (const char* folder : {"models/hf/qwen2-tiny", "models/hf/chatglm-tiny", "models/hf/llama3-tiny"}) {
    AUTOGLM_REQUIRE_SHARED(std::string(folder) + "/config.json");
    SCOPED_TRACE(folder);
    const std::string out = ::testing::TempDir() + "/padded.gguf";
    ThreadPool pool(2);
    auto report = convert_hf_folder(test::shared_path(folder), out, DType::F32, pool);
    ASSERT_TRUE(report.is_ok()) << report.status().message();
    auto gguf = GgufFile::open(out);
    ASSERT_TRUE(gguf.is_ok()) << gguf.status().message();
    const GgufTensorInfo* embedding = (*gguf)->find_tensor("token_embd.weight");
    ASSERT_NE(embedding, nullptr);
    const GgufValue* tokens = (*gguf)->find("tokenizer.ggml.tokens");
    const GgufValue* types = (*gguf)->find("tokenizer.ggml.token_type");
    ASSERT_TRUE(tokens && types);
    const std::vector<std::string>& pieces = tokens->strs;
    ASSERT_EQ(int64_t(pieces.size()), embedding->dims[1]);
    ASSERT_EQ(types->ints.size(), pieces.size());
    auto tok = load_hf_tokenizer(test::shared_path(folder));
    ASSERT_TRUE(tok.is_ok());
    const size_t real = size_t((*tok)->vocab().size());
    for (size_t i = real; i < pieces.size(); ++i) {
      EXPECT_EQ(pieces[i], "[PAD" + std::to_string(i) + "]");
      EXPECT_EQ(types->ints[i], 5) << "UNUSED";
    }
    // The padded file still loads and tokenizes as the folder does.
    auto model = Model::load(out);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    std::filesystem::remove(out);
  }
}

}  // namespace
}  // namespace autoglm
