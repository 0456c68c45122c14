// Architectures with no reference engine at hand (Qwen3, GLM-4-0414), Mistral's sliding
// window and the rope_scaling types, each as a small random Hugging Face folder written
// here, loaded by the engine and compared with a float64 forward pass written from the
// Hugging Face modelling code (hf_reference.h). Also: config.json errors.
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
#include "hf_reference.h"
#include "model/convert.h"
#include "model/model.h"
#include "model_test_util.h"
#include "test_util.h"
#include "tokenizer/hf_tokenizer.h"

namespace autoglm {
namespace {

using nlohmann::json;

struct HfTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// Writes model.safetensors the way the safetensors library does (sorted names, padded header).
void write_safetensors(const std::string& path, const std::map<std::string, HfTensor>& tensors, bool bf16) {
  json header = json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    const size_t begin = data.size();
    for (float v : t.values) {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      if (bf16) {
        const uint16_t h = uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);  // round to nearest even
        data.append(reinterpret_cast<const char*>(&h), 2);
      } else {
        data.append(reinterpret_cast<const char*>(&bits), 4);
      }
    }
    header[name] = {{"dtype", bf16 ? "BF16" : "F32"}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << text << data;
}

class FolderBuilder {
 public:
  FolderBuilder(json config, uint32_t seed) : config_(std::move(config)), rng_(seed) {}

  void add(const std::string& name, std::vector<int64_t> shape, double std_dev, double mean = 0) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::normal_distribution<double> dist(mean, std_dev);
    HfTensor t{std::move(shape), {}};
    for (int64_t i = 0; i < n; ++i) t.values.push_back(float(dist(rng_)));
    tensors_[name] = std::move(t);
  }

  // The decoder layers of transformers' layout; `fused_mlp`: gate_up_proj ([gate; up] rows).
  void add_decoder(bool biases, bool qk_norm, bool post_norms, bool fused_mlp) {
    const int64_t d = config_["hidden_size"], nh = config_["num_attention_heads"], nkv = config_["num_key_value_heads"];
    const int64_t hd = config_.value("head_dim", d / nh), ff = config_["intermediate_size"],
                  vocab = config_["vocab_size"];
    add("model.embed_tokens.weight", {vocab, d}, 1.0);
    add("model.norm.weight", {d}, 0.2, 1.0);
    if (!config_.value("tie_word_embeddings", false)) add("lm_head.weight", {vocab, d}, 8.0 / std::sqrt(double(d)));
    for (int64_t il = 0; il < config_["num_hidden_layers"].get<int64_t>(); ++il) {
      const std::string L = "model.layers." + std::to_string(il) + ".";
      add(L + "input_layernorm.weight", {d}, 0.2, 1.0);
      add(L + "post_attention_layernorm.weight", {d}, 0.2, 1.0);
      add(L + "self_attn.q_proj.weight", {nh * hd, d}, 2.0 / std::sqrt(double(d)));
      add(L + "self_attn.k_proj.weight", {nkv * hd, d}, 2.0 / std::sqrt(double(d)));
      add(L + "self_attn.v_proj.weight", {nkv * hd, d}, 1.0 / std::sqrt(double(d)));
      add(L + "self_attn.o_proj.weight", {d, nh * hd}, 3.0 / std::sqrt(double(nh * hd)));
      if (biases)
        for (const char* p : {"q", "k", "v"})
          add(L + "self_attn." + p + "_proj.bias", {(std::string(p) == "q" ? nh : nkv) * hd}, 0.5);
      if (qk_norm) {
        add(L + "self_attn.q_norm.weight", {hd}, 0.4, 1.0);
        add(L + "self_attn.k_norm.weight", {hd}, 0.4, 1.0);
      }
      if (post_norms) {
        add(L + "post_self_attn_layernorm.weight", {d}, 0.2, 1.0);
        add(L + "post_mlp_layernorm.weight", {d}, 0.2, 1.0);
      }
      if (fused_mlp) {
        add(L + "mlp.gate_up_proj.weight", {2 * ff, d}, 1.0 / std::sqrt(double(d)));
      } else {
        add(L + "mlp.gate_proj.weight", {ff, d}, 1.0 / std::sqrt(double(d)));
        add(L + "mlp.up_proj.weight", {ff, d}, 1.0 / std::sqrt(double(d)));
      }
      add(L + "mlp.down_proj.weight", {d, ff}, 3.0 / std::sqrt(double(ff)));
    }
  }

  std::string write(const std::string& name, bool bf16) const {
    const std::string dir = test::temp_path(name);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/config.json") << config_.dump(2);
    write_safetensors(dir + "/model.safetensors", tensors_, bf16);
    // A placeholder vocabulary, so that `convert` has a tokenizer to carry.
    json vocab = json::object();
    for (int i = 0; i < config_["vocab_size"].get<int>(); ++i) {
      std::string token = "t";
      token += std::to_string(i);
      vocab[token] = i;
    }
    json tokenizer = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
                      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
                      {"decoder", {{"type", "ByteLevel"}}}};
    std::ofstream(dir + "/tokenizer.json") << tokenizer.dump();
    return dir;
  }

 private:
  json config_;
  std::mt19937 rng_;
  std::map<std::string, HfTensor> tensors_;
};

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
  c = good;
  c.erase("hidden_size");
  expect_config_error(c, "missing field 'hidden_size'");
  c = good;
  c["num_hidden_layers"] = -2;
  expect_config_error(c, "'num_hidden_layers' must be a positive integer");
  c = good;
  c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  expect_config_error(c, "rope_scaling type 'yarn'");
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
