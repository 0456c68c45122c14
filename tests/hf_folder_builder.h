// Random Hugging Face model folders for tests: config.json, model.safetensors written as the
// safetensors library writes it, and a placeholder tokenizer.json.
#pragma once

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"

namespace autoglm {

using nlohmann::json;

struct HfTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
  std::vector<uint8_t> bytes;  // a U8 tensor (MXFP4 blocks and scales) when not empty
};

// Writes model.safetensors the way the safetensors library does (sorted names, padded header).
inline void write_safetensors(const std::string& path, const std::map<std::string, HfTensor>& tensors, bool bf16) {
  json header = json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    const size_t begin = data.size();
    if (!t.bytes.empty()) {
      data.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
      header[name] = {{"dtype", "U8"}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
      continue;
    }
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
    HfTensor t{std::move(shape), {}, {}};
    for (int64_t i = 0; i < n; ++i) t.values.push_back(float(dist(rng_)));
    tensors_[name] = std::move(t);
  }

  // A U8 tensor of uniform bytes in [lo, hi].
  void add_u8(const std::string& name, std::vector<int64_t> shape, int lo, int hi) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::uniform_int_distribution<int> dist(lo, hi);
    HfTensor t{std::move(shape), {}, {}};
    for (int64_t i = 0; i < n; ++i) t.bytes.push_back(uint8_t(dist(rng_)));
    tensors_[name] = std::move(t);
  }

  int64_t cfg(const char* key) const { return config_[key].get<int64_t>(); }
  int64_t n_layer() const { return cfg("num_hidden_layers"); }

  void add_globals() {
    const int64_t d = cfg("hidden_size"), vocab = cfg("vocab_size");
    add("model.embed_tokens.weight", {vocab, d}, 1.0);
    add("model.norm.weight", {d}, 0.2, 1.0);
    if (!config_.value("tie_word_embeddings", false)) add("lm_head.weight", {vocab, d}, 8.0 / std::sqrt(double(d)));
  }

  // Norms and q/k/v/o of transformers' attention.
  void add_attention(const std::string& L, bool biases, bool qk_norm) {
    const int64_t d = cfg("hidden_size"), nh = cfg("num_attention_heads"), nkv = cfg("num_key_value_heads");
    const int64_t hd = config_.value("head_dim", d / nh);
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
  }

  // A SwiGLU MLP of width ff: prefix + gate_proj/up_proj/down_proj (or Mixtral's w1/w3/w2).
  void add_mlp(const std::string& prefix, int64_t ff, bool mixtral_names = false) {
    const int64_t d = cfg("hidden_size");
    add(prefix + (mixtral_names ? "w1" : "gate_proj") + ".weight", {ff, d}, 1.0 / std::sqrt(double(d)));
    add(prefix + (mixtral_names ? "w3" : "up_proj") + ".weight", {ff, d}, 1.0 / std::sqrt(double(d)));
    add(prefix + (mixtral_names ? "w2" : "down_proj") + ".weight", {d, ff}, 3.0 / std::sqrt(double(ff)));
  }

  // The decoder layers of transformers' layout; `fused_mlp`: gate_up_proj ([gate; up] rows).
  void add_decoder(bool biases, bool qk_norm, bool post_norms, bool fused_mlp) {
    const int64_t d = cfg("hidden_size"), ff = cfg("intermediate_size");
    add_globals();
    for (int64_t il = 0; il < n_layer(); ++il) {
      const std::string L = "model.layers." + std::to_string(il) + ".";
      add_attention(L, biases, qk_norm);
      if (post_norms) {
        add(L + "post_self_attn_layernorm.weight", {d}, 0.2, 1.0);
        add(L + "post_mlp_layernorm.weight", {d}, 0.2, 1.0);
      }
      if (fused_mlp) {
        add(L + "mlp.gate_up_proj.weight", {2 * ff, d}, 1.0 / std::sqrt(double(d)));
        add(L + "mlp.down_proj.weight", {d, ff}, 3.0 / std::sqrt(double(ff)));
      } else {
        add_mlp(L + "mlp.", ff);
      }
    }
  }

  // Router, per-expert tensors and shared experts of one MoE layer, under the HF names of the
  // family: "qwen2" (shared_expert + its sigmoid gate), "deepseek" (shared_experts and the
  // selection bias), "mixtral" (block_sparse_moe), anything else: routed experts only.
  void add_moe(const std::string& L, const std::string& family) {
    const int64_t d = cfg("hidden_size");
    const int64_t n = config_.value("n_routed_experts", config_.value("num_experts", cfg_or("num_local_experts")));
    const bool mixtral = family == "mixtral";
    const int64_t ff = mixtral ? cfg("intermediate_size") : cfg("moe_intermediate_size");
    add(L + (mixtral ? "block_sparse_moe.gate.weight" : "mlp.gate.weight"), {n, d}, 2.0 / std::sqrt(double(d)));
    for (int64_t e = 0; e < n; ++e)
      add_mlp(L + (mixtral ? "block_sparse_moe.experts." : "mlp.experts.") + std::to_string(e) + ".", ff, mixtral);
    if (family == "qwen2") {
      add_mlp(L + "mlp.shared_expert.", cfg("shared_expert_intermediate_size"));
      add(L + "mlp.shared_expert_gate.weight", {1, d}, 1.0 / std::sqrt(double(d)));
    } else if (family == "deepseek") {
      add_mlp(L + "mlp.shared_experts.", ff * cfg("n_shared_experts"));
      add(L + "mlp.gate.e_score_correction_bias", {n}, 0.1);
    }
  }

  // DeepSeek's latent attention (q_lora_rank null: a plain q_proj).
  void add_mla_attention(const std::string& L) {
    const int64_t d = cfg("hidden_size"), nh = cfg("num_attention_heads"), lora = cfg("kv_lora_rank");
    const int64_t qk = cfg("qk_nope_head_dim") + cfg("qk_rope_head_dim"), vd = cfg("v_head_dim");
    add(L + "input_layernorm.weight", {d}, 0.2, 1.0);
    add(L + "post_attention_layernorm.weight", {d}, 0.2, 1.0);
    if (config_.contains("q_lora_rank") && config_["q_lora_rank"].is_number()) {
      const int64_t ql = cfg("q_lora_rank");
      add(L + "self_attn.q_a_proj.weight", {ql, d}, 1.0 / std::sqrt(double(d)));
      add(L + "self_attn.q_a_layernorm.weight", {ql}, 0.2, 1.0);
      add(L + "self_attn.q_b_proj.weight", {nh * qk, ql}, 2.0 / std::sqrt(double(ql)));
    } else {
      add(L + "self_attn.q_proj.weight", {nh * qk, d}, 2.0 / std::sqrt(double(d)));
    }
    add(L + "self_attn.kv_a_proj_with_mqa.weight", {lora + cfg("qk_rope_head_dim"), d}, 2.0 / std::sqrt(double(d)));
    add(L + "self_attn.kv_a_layernorm.weight", {lora}, 0.2, 1.0);
    add(L + "self_attn.kv_b_proj.weight", {nh * (qk - cfg("qk_rope_head_dim") + vd), lora},
        1.5 / std::sqrt(double(lora)));
    add(L + "self_attn.o_proj.weight", {d, nh * vd}, 3.0 / std::sqrt(double(nh * vd)));
  }

  // The NextN/MTP block's own tensors (its decoder part comes from the layer builders).
  void add_nextn(const std::string& L) {
    const int64_t d = cfg("hidden_size");
    add(L + "eh_proj.weight", {d, 2 * d}, 0.1);
    add(L + "enorm.weight", {d}, 0.2, 1.0);
    add(L + "hnorm.weight", {d}, 0.2, 1.0);
    add(L + "shared_head.norm.weight", {d}, 0.2, 1.0);
  }

  // Moves every tensor named prefix `from`... to prefix `to` (transformers 4.52+'s
  // model.language_model. layout of vision-language checkpoints).
  void rename_prefix(const std::string& from, const std::string& to) {
    std::map<std::string, HfTensor> moved;
    for (auto& [name, t] : tensors_)
      moved[name.rfind(from, 0) == 0 ? to + name.substr(from.size()) : name] = std::move(t);
    tensors_ = std::move(moved);
  }
  // The config.json to write (the builders read the decoder's fields from the first one).
  void replace_config(json config) { config_ = std::move(config); }

  std::string write(const std::string& name, bool bf16) const {
    const std::string dir = test::temp_path(name);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/config.json") << config_.dump(2);
    write_safetensors(dir + "/model.safetensors", tensors_, bf16);
    // A placeholder vocabulary, so that `convert` has a tokenizer to carry.
    json vocab = json::object();
    const json& text = config_.contains("text_config") ? config_["text_config"] : config_;
    for (int i = 0; i < text["vocab_size"].get<int>(); ++i) {
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
  int64_t cfg_or(const char* key) const { return config_.value(key, int64_t(0)); }

  json config_;
  std::mt19937 rng_;
  std::map<std::string, HfTensor> tensors_;
};

}  // namespace autoglm
