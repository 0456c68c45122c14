// The vocabulary as GGUF describes it (tokenizer.ggml.*).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "autoglm/status.h"
#include "formats/gguf.h"

namespace autoglm {

// Token types as stored in tokenizer.ggml.token_type.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class TokenizerKind { kSpm, kBpe };

struct Vocab {
  TokenizerKind kind = TokenizerKind::kSpm;
  std::string pre;  // tokenizer.ggml.pre (BPE pre-tokenizer name)
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<TokenType> types;
  std::unordered_map<std::string, int32_t> index;
  std::unordered_map<std::string, int32_t> merge_rank;  // "left right" -> rank (BPE)

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = true;            // SPM: a leading space before the text
  bool ignore_merges = false;              // BPE: a whole word that is a token is taken as is
  bool byte_level = true;                  // BPE: words are GPT-2 byte-level strings
  bool byte_fallback = false;              // BPE: characters without a token become <0xNN> tokens
  bool fuse_unk = false;                   // BPE: a run of unknown characters is one unk token
  std::vector<int32_t> extra_eog;          // more end-of-generation ids (generation_config.json)
  std::array<int32_t, 256> byte_tokens{};  // SPM byte-fallback token per byte, -1 if absent
  std::string chat_template;

  int32_t size() const { return int32_t(pieces.size()); }
  int32_t find(const std::string& piece) const {
    auto it = index.find(piece);
    return it == index.end() ? -1 : it->second;
  }
  bool is_special(int32_t id) const {
    const TokenType t = types[size_t(id)];
    return t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUserDefined;
  }
  // End of generation: EOS, EOT or EOM.
  // Every end-of-generation id.
  std::vector<int32_t> eog_ids() const {
    std::vector<int32_t> ids = extra_eog;
    for (int32_t id : {eos, eot, eom})
      if (id >= 0) ids.push_back(id);
    return ids;
  }
  bool is_eog(int32_t id) const {
    if (id < 0) return false;
    if (id == eos || id == eot || id == eom) return true;
    for (int32_t e : extra_eog)
      if (id == e) return true;
    return false;
  }
};

Result<Vocab> load_vocab(const GgufFile& file);

// Chat models often mark their end-of-turn token only by name (<|im_end|>, <|eot_id|>, ...).
int32_t guess_end_of_turn(const Vocab& vocab);

// gpt-oss's harmony vocabulary (it has <|return|> and <|call|>): <|end|> ends a message, not the
// generation, so it is no end-of-generation token; <|return|> and <|call|> are.
void apply_harmony_ends(Vocab& vocab);

}  // namespace autoglm
