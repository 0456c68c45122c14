// Random tensors for the models `create-model` writes: a deterministic generator (one stream per
// tensor name), matrices quantized row by row on the pool's threads while the file is written
// (one tensor in memory at a time), and the built-in vocabulary.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "kernels/ref/quants.h"
#include "tokenizer/vocab.h"

namespace autoglm {

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

inline uint64_t name_seed(uint64_t seed, const std::string& name) {
  uint64_t h = seed * 0x100000001b3ull ^ 0xcbf29ce484222325ull;
  for (char c : name) h = (h ^ uint8_t(c)) * 0x100000001b3ull;
  return h;
}

// The built-in vocabulary: specials, 256 byte tokens, characters, and pieces of two and
// three letters (with and without the leading-space marker), up to n_vocab; `specials` (a
// model's chat and image markers) take the last ids.
using SpecialPiece = std::pair<std::string, TokenType>;
void add_vocabulary(GgufWriter& w, int64_t n_vocab, const std::vector<SpecialPiece>& specials = {});

// The type a matrix with rows of `cols` values gets: the wanted one where its rows are whole
// blocks, else (as llama.cpp's quantizer does) a plainer one.
inline DType fitting_type(DType wanted, int64_t cols) {
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

}  // namespace autoglm
