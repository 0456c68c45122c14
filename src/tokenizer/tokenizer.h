// Text <-> token ids for a model, from its GGUF tokenizer metadata.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "formats/gguf.h"
#include "tokenizer/vocab.h"

namespace autoglm {

class PreTokenizer;

class Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& file);
  explicit Tokenizer(Vocab vocab, std::shared_ptr<const PreTokenizer> pre);

  // add_special: BOS/EOS as the vocabulary asks. parse_special: control tokens written
  // in the text ("<|im_start|>") become those tokens; user-defined tokens always do.
  std::vector<int32_t> encode(const std::string& text, bool add_special, bool parse_special = false) const;

  // The bytes a token stands for; control and unknown tokens only when `special`.
  std::string token_to_piece(int32_t id, bool special = false) const;
  std::string decode(const std::vector<int32_t>& ids, bool special = false) const;

  const Vocab& vocab() const { return vocab_; }
  int32_t n_vocab() const { return vocab_.size(); }

 private:
  void encode_text(const std::string& text, bool after_special, std::vector<int32_t>& out) const;

  Vocab vocab_;
  std::shared_ptr<const PreTokenizer> pre_;
  std::vector<int32_t> special_by_length_;  // special tokens, longest text first
};

// Streams text token by token without ever splitting a UTF-8 character.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // Text that is complete after this token (may be empty while a character is pending).
  std::string push(int32_t id);
  // Whatever is still pending (an incomplete character at the end of generation).
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
};

}  // namespace autoglm
