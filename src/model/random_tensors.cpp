#include "model/random_tensors.h"

#include <cstdio>

#include "tokenizer/vocab.h"

namespace autoglm {

void add_vocabulary(GgufWriter& w, int64_t n_vocab, const std::vector<SpecialPiece>& specials) {
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
  for (int i = 0; int64_t(tokens.size() + specials.size()) < n_vocab; ++i)
    add("<unused" + std::to_string(i) + ">", -100, TokenType::kUnused);
  if (int64_t(tokens.size() + specials.size()) > n_vocab) {  // the specials replace the last pieces
    tokens.resize(size_t(n_vocab) - specials.size());
    scores.resize(tokens.size());
    types.resize(tokens.size());
  }
  for (const auto& [piece, type] : specials) {
    tokens.push_back(piece);
    scores.push_back(0);
    types.push_back(int32_t(type));
  }
  w.set("tokenizer.ggml.model", GgufValue::string("llama"));
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  w.set("tokenizer.ggml.scores", GgufValue::f32_array(scores));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  w.set("tokenizer.ggml.unknown_token_id", GgufValue::u32(0));
  w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(1));
  w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(2));
  w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(true));
}

}  // namespace autoglm
