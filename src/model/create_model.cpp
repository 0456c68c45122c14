#include "model/create_model.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "formats/gguf.h"
#include "kernels/ref/quants.h"
#include "model/arch.h"
#include "tokenizer/vocab.h"

namespace autoglm {
namespace {

struct Preset {
  std::string name;
  int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
};

const std::vector<Preset>& presets() {
  // Widths are multiples of 256 so that every K-quant applies. 1b is TinyLlama-1.1B's shape.
  static const std::vector<Preset> p = {
      {"tiny", 256, 2, 4, 2, 512, 2048, 2048},
      {"150m", 768, 12, 12, 4, 2816, 32000, 2048},
      {"1b", 2048, 22, 32, 4, 5632, 32000, 2048},
  };
  return p;
}

// splitmix64: a fast, well-mixed generator; one stream per tensor name.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return float(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
  // Sum of four uniforms: roughly normal, cheap, deterministic everywhere.
  float normal() { return (uniform() + uniform() + uniform() + uniform() - 2.0f) * 1.7320508f; }
};

uint64_t name_seed(uint64_t seed, const std::string& name) {
  uint64_t h = seed * 0x100000001b3ull ^ 0xcbf29ce484222325ull;
  for (char c : name) h = (h ^ uint8_t(c)) * 0x100000001b3ull;
  return h;
}

// The built-in vocabulary: specials, 256 byte tokens, characters, and pieces of two and
// three letters (with and without the leading-space marker), up to the preset's size.
void add_vocabulary(GgufWriter& w, int64_t n_vocab) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {int32_t(TokenType::kUnknown), int32_t(TokenType::kControl),
                                int32_t(TokenType::kControl)};
  auto add = [&](const std::string& piece, float score, TokenType type) {
    if (int64_t(tokens.size()) >= n_vocab) return;
    tokens.push_back(piece);
    scores.push_back(score);
    types.push_back(int32_t(type));
  };
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    add(name, 0, TokenType::kByte);
  }
  const std::string space = "\xe2\x96\x81";
  add(space, -1, TokenType::kNormal);
  for (char c = '!'; c <= '~'; ++c) add(std::string(1, c), -2, TokenType::kNormal);
  const std::string letters = "etaoinshrdlucmfwypvbgkjqxz";
  for (char a : letters) add(space + a, -3, TokenType::kNormal);
  for (char a : letters)
    for (char b : letters) add(std::string{a, b}, -4, TokenType::kNormal);
  for (char a : letters)
    for (char b : letters) add(space + a + b, -5, TokenType::kNormal);
  // Fill the rest with three-letter pieces, so that any token a random model picks is visible text.
  for (const std::string& prefix : {std::string(), space})
    for (char a : letters)
      for (char b : letters)
        for (char c : letters) add(prefix + a + b + c, -6, TokenType::kNormal);
  for (int i = 0; int64_t(tokens.size()) < n_vocab; ++i)
    add("<unused" + std::to_string(i) + ">", -100, TokenType::kUnused);
  w.set("tokenizer.ggml.model", GgufValue::string("llama"));
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  w.set("tokenizer.ggml.scores", GgufValue::f32_array(scores));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  w.set("tokenizer.ggml.unknown_token_id", GgufValue::u32(0));
  w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(1));
  w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(2));
  w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(true));
}

class TensorMaker {
 public:
  TensorMaker(GgufWriter& w, DType type, uint64_t seed) : w_(w), type_(type), seed_(seed) {}

  Status matrix(const std::string& name, int64_t rows, int64_t cols) {
    Rng rng{name_seed(seed_, name)};
    const float scale = 0.5f / std::sqrt(float(cols));
    std::vector<float> row(static_cast<size_t>(cols));
    const int64_t row_bytes = dtype_row_bytes(type_, cols);
    std::vector<uint8_t> data(static_cast<size_t>(row_bytes * rows));
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : row) v = rng.normal() * scale;
      ref::quantize_row(type_, row.data(), data.data() + r * row_bytes, cols);
    }
    return w_.add_tensor(name, type_, {cols, rows}, std::move(data));
  }

  // Norm weights near 1, biases near 0.
  Status vector(const std::string& name, int64_t n, float center, float spread) {
    Rng rng{name_seed(seed_, name)};
    std::vector<uint8_t> data(size_t(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      const float v = center + spread * rng.normal();
      std::memcpy(data.data() + 4 * i, &v, 4);
    }
    return w_.add_tensor(name, DType::F32, {n}, std::move(data));
  }

 private:
  GgufWriter& w_;
  DType type_;
  uint64_t seed_;
};

}  // namespace

const std::vector<std::string>& create_model_presets() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& p : presets()) n.push_back(p.name);
    return n;
  }();
  return names;
}

Status create_random_model(const CreateModelOptions& o, const std::string& path) {
  const Preset* preset = nullptr;
  for (const auto& p : presets())
    if (p.name == o.preset) preset = &p;
  if (!preset) return invalid_argument("--preset '" + o.preset + "' is not one of tiny, 150m, 1b");
  if (o.arch != "llama" && o.arch != "qwen2" && o.arch != "qwen3")
    return invalid_argument("--arch '" + o.arch + "' is not one of llama, qwen2, qwen3");
  if (!ref::dtype_is_supported(o.type))
    return invalid_argument("--type " + std::string(dtype_name(o.type)) + " is not a supported weight type");

  if (o.n_vocab != 0 && (o.n_vocab < 512 || o.n_vocab > 1000000))
    return invalid_argument("--vocab " + std::to_string(o.n_vocab) + " is not in [512, 1000000]");
  Preset p = *preset;
  if (o.n_vocab != 0) p.n_vocab = o.n_vocab;
  const int64_t head_dim = p.n_embd / p.n_head;
  GgufWriter w;
  const std::string a = o.arch + ".";
  w.set("general.architecture", GgufValue::string(o.arch));
  w.set("general.name", GgufValue::string("autoglm-random-" + o.arch + "-" + p.name));
  w.set("general.file_type", GgufValue::u32(gguf_file_type(o.type)));
  if (dtype_info(o.type).block_elems > 1) w.set("general.quantization_version", GgufValue::u32(2));
  w.set(a + "context_length", GgufValue::u32(uint32_t(p.n_ctx)));
  w.set(a + "embedding_length", GgufValue::u32(uint32_t(p.n_embd)));
  w.set(a + "block_count", GgufValue::u32(uint32_t(p.n_layer)));
  w.set(a + "feed_forward_length", GgufValue::u32(uint32_t(p.n_ff)));
  w.set(a + "attention.head_count", GgufValue::u32(uint32_t(p.n_head)));
  w.set(a + "attention.head_count_kv", GgufValue::u32(uint32_t(p.n_head_kv)));
  w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::f32(1e-5f));
  w.set(a + "rope.dimension_count", GgufValue::u32(uint32_t(head_dim)));
  w.set(a + "rope.freq_base", GgufValue::f32(o.arch == "llama" ? 10000.0f : 1000000.0f));
  if (o.arch == "qwen3") {
    w.set(a + "attention.key_length", GgufValue::u32(uint32_t(head_dim)));
    w.set(a + "attention.value_length", GgufValue::u32(uint32_t(head_dim)));
  }
  add_vocabulary(w, p.n_vocab);

  TensorMaker make(w, o.type, o.seed);
  AUTOGLM_RETURN_IF_ERROR(make.matrix("token_embd.weight", p.n_vocab, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.vector("output_norm.weight", p.n_embd, 1.0f, 0.0f));
  AUTOGLM_RETURN_IF_ERROR(make.matrix("output.weight", p.n_vocab, p.n_embd));
  for (int64_t il = 0; il < p.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_norm.weight", p.n_embd, 1.0f, 0.0f));
    AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_q.weight", p.n_head * head_dim, p.n_embd));
    AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_k.weight", p.n_head_kv * head_dim, p.n_embd));
    AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_v.weight", p.n_head_kv * head_dim, p.n_embd));
    AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_output.weight", p.n_embd, p.n_head * head_dim));
    if (o.arch == "qwen2") {
      AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_q.bias", p.n_head * head_dim, 0.0f, 0.02f));
      AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_k.bias", p.n_head_kv * head_dim, 0.0f, 0.02f));
      AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_v.bias", p.n_head_kv * head_dim, 0.0f, 0.02f));
    }
    if (o.arch == "qwen3") {
      AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_q_norm.weight", head_dim, 1.0f, 0.1f));
      AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_k_norm.weight", head_dim, 1.0f, 0.1f));
    }
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "ffn_norm.weight", p.n_embd, 1.0f, 0.0f));
    AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_gate.weight", p.n_ff, p.n_embd));
    AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_up.weight", p.n_ff, p.n_embd));
    AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_down.weight", p.n_embd, p.n_ff));
  }
  return w.write(path);
}

Status create_random_lora(const std::string& base_path, int64_t rank, float alpha, uint64_t seed,
                          const std::string& path) {
  if (rank < 1 || rank > 1024) return invalid_argument("--rank " + std::to_string(rank) + " is not in [1, 1024]");
  AUTOGLM_ASSIGN_OR_RETURN(auto base, GgufFile::open(base_path));
  GgufWriter w;
  w.set("general.architecture", GgufValue::string(base->get_string("general.architecture").value_or("llama")));
  w.set("general.type", GgufValue::string("adapter"));
  w.set("adapter.type", GgufValue::string("lora"));
  w.set("adapter.lora.alpha", GgufValue::f32(alpha));
  const char* targets[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  for (const GgufTensorInfo& t : base->tensors()) {
    bool targeted = false;
    for (const char* name : targets)
      targeted = targeted || (t.name.rfind("blk.", 0) == 0 &&
                              t.name.find(std::string(".") + name + ".weight") != std::string::npos);
    if (!targeted || t.dims.size() != 2) continue;
    const int64_t n_in = t.dims[0], n_out = t.dims[1];
    Rng rng{name_seed(seed, t.name)};
    std::vector<float> a(size_t(rank * n_in)), b(size_t(n_out * rank));
    const float a_std = 1.0f / std::sqrt(float(n_in)), b_std = 0.01f;
    for (float& v : a) v = rng.normal() * a_std;
    for (float& v : b) v = rng.normal() * b_std;
    auto bytes = [](const std::vector<float>& v) {
      std::vector<uint8_t> out(v.size() * sizeof(float));
      std::memcpy(out.data(), v.data(), out.size());
      return out;
    };
    AUTOGLM_RETURN_IF_ERROR(w.add_tensor(t.name + ".lora_a", DType::F32, {n_in, rank}, bytes(a)));
    AUTOGLM_RETURN_IF_ERROR(w.add_tensor(t.name + ".lora_b", DType::F32, {rank, n_out}, bytes(b)));
  }
  return w.write(path);
}

}  // namespace autoglm
