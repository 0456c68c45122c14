#include "model/create_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "kernels/ref/quants.h"
#include "tokenizer/vocab.h"

namespace autoglm {
namespace {

// A model's shape. Widths are multiples of 256 where they can be, so that every K-quant applies.
struct Preset {
  std::string name;
  int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx;
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;                  // mixture of experts (0: dense)
  int64_t q_lora = 0, kv_lora = 0, qk_rope = 0, qk_nope = 0, v_head = 0;  // deepseek2's MLA
};

const std::vector<Preset>& dense_presets() {
  // 1b is TinyLlama-1.1B's shape.
  static const std::vector<Preset> p = {
      {"tiny", 256, 2, 4, 2, 64, 512, 2048, 2048},
      {"150m", 768, 12, 12, 4, 64, 2816, 32000, 2048},
      {"1b", 2048, 22, 32, 4, 64, 5632, 32000, 2048},
  };
  return p;
}

const std::vector<Preset>& moe_presets() {
  // 30b-a3b is Qwen3-30B-A3B's width (n_ff: the dense layers of glm4moe and deepseek2); the MLA
  // ranks are DeepSeek-V3's, scaled to it.
  static const std::vector<Preset> p = {
      {"tiny", 256, 4, 4, 2, 64, 512, 2048, 2048, 8, 2, 256, 256, 256, 32, 64, 64},
      {"30b-a3b", 2048, 48, 32, 4, 128, 6144, 151936, 40960, 128, 8, 768, 768, 512, 64, 128, 128},
  };
  return p;
}

// What an architecture's blocks hold, beyond attention and an FFN.
struct ArchTraits {
  std::string name;
  bool moe = false;
  bool qkv_bias = false;
  bool qk_norm = false;
  bool ffn_post_attention_norm = false;  // the FFN's input norm is post_attention_norm (not ffn_norm)
  bool gpt_oss = false;                  // attention sinks, o bias, router and expert biases
  bool probs_bias = false;               // exp_probs_b.bias (sigmoid routing)
  bool shared_expert = false;            // one ffn_*_shexp expert
  bool leading_dense = false;            // block 0 has a dense FFN
  bool mla = false;                      // deepseek2's multi-head latent attention
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
};

const std::vector<ArchTraits>& arch_traits() {
  static const std::vector<ArchTraits> a = [] {
    std::vector<ArchTraits> v(7);
    v[0].name = "llama";
    v[1].name = "qwen2", v[1].qkv_bias = true, v[1].rope_base = 1e6f;
    v[2].name = "qwen3", v[2].qk_norm = true, v[2].rope_base = 1e6f;
    v[3].name = "qwen3moe", v[3].moe = v[3].qk_norm = true, v[3].rope_base = 1e6f, v[3].rms_eps = 1e-6f;
    v[4].name = "glm4moe", v[4].moe = v[4].qkv_bias = v[4].ffn_post_attention_norm = true;
    v[4].probs_bias = v[4].shared_expert = v[4].leading_dense = true, v[4].rope_base = 1e6f;
    v[5].name = "gpt-oss", v[5].moe = v[5].qkv_bias = v[5].ffn_post_attention_norm = v[5].gpt_oss = true;
    v[5].rope_base = 150000.0f;
    v[6].name = "deepseek2", v[6].moe = v[6].probs_bias = v[6].shared_expert = v[6].leading_dense = true;
    v[6].mla = true;
    return v;
  }();
  return a;
}

std::string names_of(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

Result<ArchTraits> find_arch(const std::string& arch) {
  for (const auto& a : arch_traits())
    if (a.name == arch) return a;
  return invalid_argument("--arch '" + arch + "' is not one of " + names_of(create_model_archs()));
}

Result<Preset> find_preset(const ArchTraits& arch, const std::string& name) {
  const auto& table = arch.moe ? moe_presets() : dense_presets();
  std::vector<std::string> names;
  for (const auto& p : table) {
    if (p.name == name) return p;
    names.push_back(p.name);
  }
  return invalid_argument("--preset '" + name + "' is not one of " + names_of(names) + " (for --arch " + arch.name +
                          ")");
}

// splitmix64: a fast, well-mixed generator; one stream per tensor name.
struct Rng {
  static constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull;
  uint64_t state;
  // The stream after `draws` calls of next(): lets threads start mid-tensor with the same values.
  static Rng at(uint64_t seed, uint64_t draws) { return Rng{seed + draws * kGamma}; }
  uint64_t next() {
    uint64_t z = (state += kGamma);
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

// The type a matrix with rows of `cols` values gets: the wanted one where its rows are whole
// blocks, else (as llama.cpp's quantizer does) a plainer one.
DType fitting_type(DType wanted, int64_t cols) {
  for (DType t : {wanted, DType::Q8_0, DType::F16})
    if (dtype_row_bytes(t, cols) > 0) return t;
  return DType::F32;
}

// Tensors of random values, made while the file is written (one at a time, so a model never sits
// in memory), matrices quantized row by row on the pool's threads.
class TensorMaker {
 public:
  TensorMaker(GgufWriter& w, DType type, uint64_t seed, ThreadPool& pool)
      : w_(w), type_(type), seed_(seed), pool_(pool) {}

  // A matrix of `rows` x `cols`, or with `n_expert` > 0 a stack of n_expert of them (GGUF dims
  // {cols, rows, n_expert}: rows * n_expert rows of cols), of the model's type or `type`.
  Status matrix(const std::string& name, int64_t rows, int64_t cols, int64_t n_expert = 0,
                std::optional<DType> type = std::nullopt) {
    const DType t = fitting_type(type.value_or(type_), cols);
    std::vector<int64_t> dims = {cols, rows};
    if (n_expert > 0) dims.push_back(n_expert);
    const int64_t n_rows = rows * std::max<int64_t>(n_expert, 1);
    const size_t n_bytes = size_t(dtype_row_bytes(t, cols) * n_rows);
    return w_.add_tensor_deferred(name, t, std::move(dims), n_bytes,
                                  [this, name, t, cols, n_rows] { return make_matrix(name, t, cols, n_rows); });
  }

  // F32 values center + spread * normal: norm weights near 1, biases near 0.
  Status vector(const std::string& name, std::vector<int64_t> dims, float center, float spread) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    Rng rng{name_seed(seed_, name)};
    std::vector<uint8_t> data(size_t(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      const float v = center + spread * rng.normal();
      std::memcpy(data.data() + 4 * i, &v, 4);
    }
    return w_.add_tensor(name, DType::F32, std::move(dims), std::move(data));
  }
  Status vector(const std::string& name, int64_t n, float center, float spread) {
    return vector(name, std::vector<int64_t>{n}, center, spread);
  }

 private:
  // The reference encoders of super-block types (the K-quants) search for the best scales, at
  // ~200 ns a value: a 30B-wide model would take most of an hour on two cores. Their rows are
  // instead random sequences of blocks drawn from a table of kTableBlocks blocks encoded from
  // values of the same distribution (per type and row length): the same statistics, no two
  // rows alike, at the cost of a copy. Other types encode every row's own values.
  static constexpr int64_t kTableBlocks = 4096;

  static bool uses_block_table(DType t) { return dtype_info(t).block_elems >= 256; }

  Result<std::pair<const uint8_t*, size_t>> make_matrix(const std::string& name, DType t, int64_t cols,
                                                        int64_t n_rows) {
    buffer_.resize(size_t(dtype_row_bytes(t, cols) * n_rows));
    if (uses_block_table(t))
      rows_from_table(block_table(t, cols), name_seed(seed_, name), t, cols, n_rows, buffer_.data());
    else
      encode_rows(name_seed(seed_, name), t, cols, n_rows, buffer_.data());
    return std::pair<const uint8_t*, size_t>{buffer_.data(), buffer_.size()};
  }

  // Row r's values are draws [4 * cols * r, 4 * cols * (r + 1)) of the stream of `seed`, whichever
  // thread makes them: the bytes do not depend on the number of threads.
  void encode_rows(uint64_t seed, DType t, int64_t cols, int64_t n_rows, uint8_t* out) {
    const float scale = 0.5f / std::sqrt(float(cols));
    const int64_t row_bytes = dtype_row_bytes(t, cols);
    pool_.parallel_for(n_rows, [&](int, int64_t r0, int64_t r1) {
      Rng rng = Rng::at(seed, uint64_t(r0) * uint64_t(cols) * 4);
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = r0; r < r1; ++r) {
        for (auto& v : row) v = rng.normal() * scale;
        ref::quantize_row(t, row.data(), out + r * row_bytes, cols);
      }
    });
  }

  // kTableBlocks encoded blocks of values scaled as in a row of `cols`.
  const std::vector<uint8_t>& block_table(DType t, int64_t cols) {
    std::vector<uint8_t>& table = tables_[{t, cols}];
    if (table.empty()) {
      const int64_t block = dtype_info(t).block_elems;
      std::vector<uint8_t> rows(size_t(dtype_row_bytes(t, block) * kTableBlocks));
      const std::string id = "block table " + std::string(dtype_name(t)) + " " + std::to_string(cols);
      const float scale = 0.5f / std::sqrt(float(cols));
      pool_.parallel_for(kTableBlocks, [&](int, int64_t b0, int64_t b1) {
        Rng rng = Rng::at(name_seed(seed_, id), uint64_t(b0) * uint64_t(block) * 4);
        std::vector<float> values(static_cast<size_t>(block));
        for (int64_t b = b0; b < b1; ++b) {
          for (auto& v : values) v = rng.normal() * scale;
          ref::quantize_row(t, values.data(), rows.data() + b * dtype_row_bytes(t, block), block);
        }
      });
      table = std::move(rows);
    }
    return table;
  }

  // Block j of row r is table entry (draw r * blocks_per_row + j of the stream of `seed`) % kTableBlocks.
  void rows_from_table(const std::vector<uint8_t>& table, uint64_t seed, DType t, int64_t cols, int64_t n_rows,
                       uint8_t* out) {
    const int64_t per_row = cols / dtype_info(t).block_elems, block_bytes = dtype_info(t).block_bytes;
    pool_.parallel_for(n_rows, [&](int, int64_t r0, int64_t r1) {
      Rng rng = Rng::at(seed, uint64_t(r0) * uint64_t(per_row));
      uint8_t* dst = out + r0 * per_row * block_bytes;
      for (int64_t i = (r1 - r0) * per_row; i > 0; --i, dst += block_bytes)
        std::memcpy(dst, table.data() + int64_t(rng.next() % kTableBlocks) * block_bytes, size_t(block_bytes));
    });
  }

  GgufWriter& w_;
  DType type_;
  uint64_t seed_;
  ThreadPool& pool_;
  std::vector<uint8_t> buffer_;
  std::map<std::pair<DType, int64_t>, std::vector<uint8_t>> tables_;
};

// The type of gpt-oss's expert matrices: MXFP4, as the model ships, where this build has it.
std::optional<DType> gpt_oss_expert_type() {
  const auto t = dtype_from_name("mxfp4");
  if (t && ref::dtype_is_supported(*t)) return t;
  return std::nullopt;
}

void set_u32(GgufWriter& w, const std::string& key, int64_t v) {
  w.set(key, GgufValue::u32(uint32_t(v)));
}

// Keys every architecture has, under "<arch>.".
void add_common_keys(GgufWriter& w, const ArchTraits& arch, const Preset& p) {
  const std::string a = arch.name + ".";
  set_u32(w, a + "context_length", p.n_ctx);
  set_u32(w, a + "embedding_length", p.n_embd);
  set_u32(w, a + "block_count", p.n_layer);
  set_u32(w, a + "feed_forward_length", arch.gpt_oss ? p.n_ff_exp : p.n_ff);
  set_u32(w, a + "attention.head_count", p.n_head);
  set_u32(w, a + "attention.head_count_kv", arch.mla ? 1 : p.n_head_kv);
  w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::f32(arch.rms_eps));
  w.set(a + "rope.freq_base", GgufValue::f32(arch.rope_base));
  if (arch.name == "llama" || arch.name == "qwen2" || arch.name == "qwen3") {
    // The dense presets' keys, as they always were.
    set_u32(w, a + "rope.dimension_count", p.head_dim);
    if (arch.name == "qwen3") {
      set_u32(w, a + "attention.key_length", p.head_dim);
      set_u32(w, a + "attention.value_length", p.head_dim);
    }
    return;
  }
  if (!arch.mla) {
    set_u32(w, a + "attention.key_length", p.head_dim);
    set_u32(w, a + "attention.value_length", p.head_dim);
    // glm4moe rotates half of each head (partial rotary).
    set_u32(w, a + "rope.dimension_count", arch.name == "glm4moe" ? p.head_dim / 2 : p.head_dim);
  }
}

void add_moe_keys(GgufWriter& w, const ArchTraits& arch, const Preset& p) {
  const std::string a = arch.name + ".";
  set_u32(w, a + "expert_count", p.n_expert);
  set_u32(w, a + "expert_used_count", p.n_expert_used);
  set_u32(w, a + "expert_feed_forward_length", p.n_ff_exp);
  if (arch.shared_expert) set_u32(w, a + "expert_shared_count", 1);
  if (arch.leading_dense) set_u32(w, a + "leading_dense_block_count", 1);
  if (arch.probs_bias) {
    set_u32(w, a + "expert_gating_func", 2);  // sigmoid
    w.set(a + "expert_weights_scale", GgufValue::f32(2.5f));
    w.set(a + "expert_weights_norm", GgufValue::boolean(true));
  }
}

void add_gpt_oss_keys(GgufWriter& w, const Preset& p) {
  set_u32(w, "gpt-oss.attention.sliding_window", 128);
  w.set("gpt-oss.rope.scaling.type", GgufValue::string("yarn"));
  w.set("gpt-oss.rope.scaling.factor", GgufValue::f32(32.0f));
  set_u32(w, "gpt-oss.rope.scaling.original_context_length", std::max<int64_t>(p.n_ctx / 32, 64));
  w.set("gpt-oss.rope.scaling.yarn_beta_fast", GgufValue::f32(32.0f));
  w.set("gpt-oss.rope.scaling.yarn_beta_slow", GgufValue::f32(1.0f));
}

// deepseek2 stores MLA as MQA over the compressed latent: key = latent + rope part, value = latent.
void add_mla_keys(GgufWriter& w, const Preset& p) {
  set_u32(w, "deepseek2.vocab_size", p.n_vocab);
  set_u32(w, "deepseek2.attention.q_lora_rank", p.q_lora);
  set_u32(w, "deepseek2.attention.kv_lora_rank", p.kv_lora);
  set_u32(w, "deepseek2.attention.key_length", p.kv_lora + p.qk_rope);
  set_u32(w, "deepseek2.attention.value_length", p.kv_lora);
  set_u32(w, "deepseek2.attention.key_length_mla", p.qk_nope + p.qk_rope);
  set_u32(w, "deepseek2.attention.value_length_mla", p.v_head);
  set_u32(w, "deepseek2.rope.dimension_count", p.qk_rope);
}

Status add_attention(TensorMaker& make, const ArchTraits& arch, const Preset& p, const std::string& b) {
  const int64_t q = p.n_head * p.head_dim, kv = p.n_head_kv * p.head_dim;
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_q.weight", q, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_k.weight", kv, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_v.weight", kv, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_output.weight", p.n_embd, q));
  if (arch.qkv_bias) {
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_q.bias", q, 0.0f, 0.02f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_k.bias", kv, 0.0f, 0.02f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_v.bias", kv, 0.0f, 0.02f));
  }
  if (arch.qk_norm) {
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_q_norm.weight", p.head_dim, 1.0f, 0.1f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_k_norm.weight", p.head_dim, 1.0f, 0.1f));
  }
  if (arch.gpt_oss) {
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_output.bias", p.n_embd, 0.0f, 0.02f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_sinks.weight", p.n_head, 0.0f, 1.0f));
  }
  return Status::ok();
}

// deepseek2's multi-head latent attention, split as llama.cpp wants it (attn_k_b, attn_v_b).
Status add_mla(TensorMaker& make, const Preset& p, const std::string& b) {
  AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_q_a_norm.weight", p.q_lora, 1.0f, 0.0f));
  AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_kv_a_norm.weight", p.kv_lora, 1.0f, 0.0f));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_q_a.weight", p.q_lora, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_q_b.weight", p.n_head * (p.qk_nope + p.qk_rope), p.q_lora));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_kv_a_mqa.weight", p.kv_lora + p.qk_rope, p.n_embd));
  // Per head: k_b maps a latent to qk_nope values (dims {qk_nope, kv_lora, n_head}), v_b a
  // value head to the latent (dims {kv_lora, v_head, n_head}).
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_k_b.weight", p.kv_lora, p.qk_nope, p.n_head));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_v_b.weight", p.v_head, p.kv_lora, p.n_head));
  return make.matrix(b + "attn_output.weight", p.n_embd, p.n_head * p.v_head);
}

Status add_dense_ffn(TensorMaker& make, const Preset& p, const std::string& b) {
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_gate.weight", p.n_ff, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_up.weight", p.n_ff, p.n_embd));
  return make.matrix(b + "ffn_down.weight", p.n_embd, p.n_ff);
}

Status add_moe_ffn(TensorMaker& make, const ArchTraits& arch, const Preset& p, const std::string& b) {
  const int64_t e = p.n_expert, ff = p.n_ff_exp;
  const auto experts = arch.gpt_oss ? gpt_oss_expert_type() : std::nullopt;
  AUTOGLM_RETURN_IF_ERROR(
      make.vector(b + "ffn_gate_inp.weight", {p.n_embd, e}, 0.0f, 0.5f / std::sqrt(float(p.n_embd))));
  if (arch.gpt_oss) AUTOGLM_RETURN_IF_ERROR(make.vector(b + "ffn_gate_inp.bias", e, 0.0f, 0.02f));
  if (arch.probs_bias) AUTOGLM_RETURN_IF_ERROR(make.vector(b + "exp_probs_b.bias", e, 0.0f, 0.02f));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_gate_exps.weight", ff, p.n_embd, e, experts));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_up_exps.weight", ff, p.n_embd, e, experts));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_down_exps.weight", p.n_embd, ff, e, experts));
  if (arch.gpt_oss) {
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "ffn_gate_exps.bias", {ff, e}, 0.0f, 0.02f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "ffn_up_exps.bias", {ff, e}, 0.0f, 0.02f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "ffn_down_exps.bias", {p.n_embd, e}, 0.0f, 0.02f));
  }
  if (!arch.shared_expert) return Status::ok();
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_gate_shexp.weight", ff, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_up_shexp.weight", ff, p.n_embd));
  return make.matrix(b + "ffn_down_shexp.weight", p.n_embd, ff);
}

Status add_block(TensorMaker& make, const ArchTraits& arch, const Preset& p, int64_t il) {
  const std::string b = "blk." + std::to_string(il) + ".";
  AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_norm.weight", p.n_embd, 1.0f, 0.0f));
  AUTOGLM_RETURN_IF_ERROR(arch.mla ? add_mla(make, p, b) : add_attention(make, arch, p, b));
  const char* ffn_norm = arch.ffn_post_attention_norm ? "post_attention_norm.weight" : "ffn_norm.weight";
  AUTOGLM_RETURN_IF_ERROR(make.vector(b + ffn_norm, p.n_embd, 1.0f, 0.0f));
  const bool dense = !arch.moe || (arch.leading_dense && il == 0);
  return dense ? add_dense_ffn(make, p, b) : add_moe_ffn(make, arch, p, b);
}

Result<Preset> resolve_preset(const ArchTraits& arch, const CreateModelOptions& o) {
  AUTOGLM_ASSIGN_OR_RETURN(Preset p, find_preset(arch, o.preset));
  if (o.n_vocab != 0 && (o.n_vocab < 512 || o.n_vocab > 1000000))
    return invalid_argument("--vocab " + std::to_string(o.n_vocab) + " is not in [512, 1000000]");
  if (o.n_layer != 0 && (o.n_layer < 1 || o.n_layer > 1000))
    return invalid_argument("--n-layer " + std::to_string(o.n_layer) + " is not in [1, 1000]");
  if (o.n_vocab != 0) p.n_vocab = o.n_vocab;
  if (o.n_layer != 0) p.n_layer = o.n_layer;
  return p;
}

}  // namespace

const std::vector<std::string>& create_model_presets() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& p : dense_presets()) n.push_back(p.name);
    for (const auto& p : moe_presets())
      if (std::find(n.begin(), n.end(), p.name) == n.end()) n.push_back(p.name);
    return n;
  }();
  return names;
}

const std::vector<std::string>& create_model_archs() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& a : arch_traits()) n.push_back(a.name);
    return n;
  }();
  return names;
}

Status create_random_model(const CreateModelOptions& o, const std::string& path) {
  AUTOGLM_ASSIGN_OR_RETURN(const ArchTraits arch, find_arch(o.arch));
  AUTOGLM_ASSIGN_OR_RETURN(const Preset p, resolve_preset(arch, o));
  if (!ref::dtype_is_supported(o.type))
    return invalid_argument("--type " + std::string(dtype_name(o.type)) + " is not a supported weight type");

  GgufWriter w;
  w.set("general.architecture", GgufValue::string(o.arch));
  w.set("general.name", GgufValue::string("autoglm-random-" + o.arch + "-" + p.name));
  w.set("general.file_type", GgufValue::u32(gguf_file_type(o.type)));
  if (dtype_info(o.type).block_elems > 1) w.set("general.quantization_version", GgufValue::u32(2));
  add_common_keys(w, arch, p);
  if (arch.moe) add_moe_keys(w, arch, p);
  if (arch.gpt_oss) add_gpt_oss_keys(w, p);
  if (arch.mla) add_mla_keys(w, p);
  add_vocabulary(w, p.n_vocab);

  ThreadPool pool(o.threads > 0 ? o.threads : physical_core_count());
  TensorMaker make(w, o.type, o.seed, pool);
  AUTOGLM_RETURN_IF_ERROR(make.matrix("token_embd.weight", p.n_vocab, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.vector("output_norm.weight", p.n_embd, 1.0f, 0.0f));
  AUTOGLM_RETURN_IF_ERROR(make.matrix("output.weight", p.n_vocab, p.n_embd));
  for (int64_t il = 0; il < p.n_layer; ++il) AUTOGLM_RETURN_IF_ERROR(add_block(make, arch, p, il));
  return w.write(path);
}

Status create_random_lora(const std::string& base_path, int64_t rank, float alpha, uint64_t seed,
                          const std::string& path) {
  if (rank < 1 || rank > 1024) return invalid_argument("--rank " + std::to_string(rank) + " is not in [1, 1024]");
  AUTOGLM_ASSIGN_OR_RETURN(auto base, GgufFile::open(base_path));
  const std::string arch = base->get_string("general.architecture").value_or("llama");
  GgufWriter w;
  w.set("general.architecture", GgufValue::string(arch));
  w.set("general.type", GgufValue::string("adapter"));
  w.set("adapter.type", GgufValue::string("lora"));
  w.set("adapter.lora.alpha", GgufValue::f32(alpha));
  const char* targets[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  // The NextN (MTP) blocks after the layers the forward pass runs take no adapter.
  const int64_t n_run =
      base->get_int(arch + ".block_count").value_or(0) - base->get_int(arch + ".nextn_predict_layers").value_or(0);
  for (const GgufTensorInfo& t : base->tensors()) {
    if (t.name.rfind("blk.", 0) == 0 && std::stoll(t.name.substr(4)) >= n_run) continue;
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
