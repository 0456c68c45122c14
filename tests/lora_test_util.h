// Random LoRA adapters for the tests, written as a GGUF adapter or a PEFT folder.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "model/model.h"

namespace autoglm::test {

// A file name in the test temp folder owned by the running test: ctest runs the tests of one
// executable as parallel processes, and a shared name races (one reads another's half-written file).
inline std::string test_temp(const std::string& name) {
  return ::testing::TempDir() + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-" + name;
}

// One LoRA pair over a base tensor (GGUF name), in the base's GGUF row order.
struct Pair {
  std::string weight;
  int64_t n_out = 0, n_in = 0, rank = 0;
  std::vector<float> a, b;  // [rank, n_in], [n_out, rank]
};

inline std::vector<Pair> random_pairs(const Model& base, const std::vector<std::string>& suffixes, int64_t rank,
                                      uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<Pair> pairs;
  for (int64_t il = 0; il < base.spec().n_layer; ++il)
    for (const std::string& suffix : suffixes) {
      const std::string name = std::string("blk.") + std::to_string(il) + "." + suffix;
      const GgufTensorInfo* t = base.file().find_tensor(name);
      if (!t) continue;
      Pair p{name, t->dims[1], t->dims[0], rank, {}, {}};
      p.a.resize(size_t(rank * p.n_in));
      p.b.resize(size_t(p.n_out * rank));
      for (float& v : p.a) v = normal(rng);
      for (float& v : p.b) v = normal(rng);
      pairs.push_back(std::move(p));
    }
  return pairs;
}

inline std::vector<uint8_t> bytes_of(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

inline void write_gguf_adapter(const std::string& path, const std::string& arch, const std::vector<Pair>& pairs,
                               float alpha) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string(arch));
  w.set("general.type", GgufValue::string("adapter"));
  w.set("adapter.type", GgufValue::string("lora"));
  w.set("adapter.lora.alpha", GgufValue::f32(alpha));
  for (const Pair& p : pairs) {
    ASSERT_TRUE(w.add_tensor(p.weight + ".lora_a", DType::F32, {p.n_in, p.rank}, bytes_of(p.a)).is_ok());
    ASSERT_TRUE(w.add_tensor(p.weight + ".lora_b", DType::F32, {p.rank, p.n_out}, bytes_of(p.b)).is_ok());
  }
  ASSERT_TRUE(w.write(path).is_ok());
}

// A safetensors file of F32 tensors (name -> shape and values), as PEFT saves one.
inline void write_safetensors(
    const std::string& path,
    const std::vector<std::tuple<std::string, std::vector<int64_t>, std::vector<float>>>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (const auto& [name, shape, values] : tensors) {
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {offset, offset + values.size() * 4}}};
    offset += values.size() * 4;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = h.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << h;
  for (const auto& [name, shape, values] : tensors)
    f.write(reinterpret_cast<const char*>(values.data()), std::streamsize(values.size() * 4));
}

// GGUF row r of a q/k matrix is HF row head*d + (r%2)*d/2 + (r%d)/2 (rotate_half pairs made
// adjacent); this inverts it, giving the HF rows of a GGUF-order matrix.
inline std::vector<float> to_hf_rows(const std::vector<float>& m, int64_t rows, int64_t cols, int64_t head_dim) {
  std::vector<float> out(m.size());
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t head = r / head_dim, in = r % head_dim;
    const int64_t hf = head * head_dim + (in % 2) * (head_dim / 2) + in / 2;
    std::copy_n(&m[size_t(r * cols)], cols, &out[size_t(hf * cols)]);
  }
  return out;
}

inline std::string hf_module(const std::string& gguf_suffix) {
  if (gguf_suffix == "attn_q.weight") return "self_attn.q_proj";
  if (gguf_suffix == "attn_k.weight") return "self_attn.k_proj";
  if (gguf_suffix == "attn_v.weight") return "self_attn.v_proj";
  if (gguf_suffix == "attn_output.weight") return "self_attn.o_proj";
  if (gguf_suffix == "ffn_gate.weight") return "mlp.gate_proj";
  if (gguf_suffix == "ffn_up.weight") return "mlp.up_proj";
  return "mlp.down_proj";
}

inline void write_peft_adapter(const std::string& dir, const Model& base, const std::vector<Pair>& pairs, float alpha,
                               bool rslora, bool permuted_qk) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/adapter_config.json") << nlohmann::json{
      {"peft_type", "LORA"},
      {"r", pairs[0].rank},
      {"lora_alpha", alpha},
      {"use_rslora", rslora},
      {"fan_in_fan_out", false},
      {"bias", "none"},
      {"modules_to_save", nullptr},
      {"target_modules",
       {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
        "down_proj"}}}.dump();
  std::vector<std::tuple<std::string, std::vector<int64_t>, std::vector<float>>> tensors;
  for (const Pair& p : pairs) {
    const size_t dot = p.weight.find('.', 4);
    const std::string layer = p.weight.substr(4, dot - 4), suffix = p.weight.substr(dot + 1);
    const std::string module = std::string("base_model.model.model.layers.") + layer + "." + hf_module(suffix);
    const bool qk = suffix == "attn_q.weight" || suffix == "attn_k.weight";
    tensors.emplace_back(module + ".lora_A.weight", std::vector<int64_t>{p.rank, p.n_in}, p.a);
    tensors.emplace_back(module + ".lora_B.weight", std::vector<int64_t>{p.n_out, p.rank},
                         qk && permuted_qk ? to_hf_rows(p.b, p.n_out, p.rank, base.spec().head_dim) : p.b);
  }
  write_safetensors(dir + "/adapter_model.safetensors", tensors);
}

// Every attention and MLP matrix.
inline const std::vector<std::string> kLoraAll = {"attn_q.weight",      "attn_k.weight",   "attn_v.weight",
                                                  "attn_output.weight", "ffn_gate.weight", "ffn_up.weight",
                                                  "ffn_down.weight"};

}  // namespace autoglm::test
