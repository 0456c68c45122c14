// Text <-> token ids for a model, from its GGUF tokenizer metadata or a Hugging Face
// tokenizer.json (see hf_tokenizer.h). Encoding: added tokens are cut out of the text
// first; each remaining fragment is normalized, pre-tokenized into words and run
// through the subword model (SPM or BPE). Decoding runs the decoder chain.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "autoglm/status.h"
#include "formats/gguf.h"
#include "tokenizer/vocab.h"

namespace autoglm {

class PreTokenizer;
class Normalizer;
class Decoder;

// How an added token (tokenizer.json added_tokens) is matched in text.
struct AddedTokenRules {
  bool lstrip = false;       // absorbs the whitespace before it
  bool rstrip = false;       // absorbs the whitespace after it
  bool single_word = false;  // only where it is not inside a word
};

// The text-processing steps around the subword model. GGUF vocabularies need only `pre`
// (BPE); tokenizer.json fills in the rest.
struct TextPipeline {
  std::shared_ptr<const Normalizer> normalizer;  // null: none
  std::shared_ptr<const PreTokenizer> pre;       // null: the fragment is one word (SPM)
  std::shared_ptr<const Decoder> decoder;        // null: the GGUF piece rules
  bool clean_up_spaces = false;                  // decode: " ." -> "." and the like
  std::unordered_map<int32_t, AddedTokenRules> added_rules;
};

class Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& file);
  Tokenizer(Vocab vocab, TextPipeline pipeline);

  // add_special: BOS/EOS as the vocabulary asks. parse_special: control tokens written
  // in the text ("<|im_start|>") become those tokens; user-defined tokens always do.
  std::vector<int32_t> encode(const std::string& text, bool add_special, bool parse_special = false) const;
  // parse_special, except inside `plain` (byte ranges, sorted, not overlapping): text there
  // is tokenized as with parse_special off, so control-token markers in it stay ordinary
  // text. For a chat prompt whose markup is the template's but whose content is untrusted.
  struct ByteRange {
    size_t begin, end;
  };
  // With `max_tokens`, encoding stops between words once more than that many ids are out: a
  // prompt over a limit is known to be so without encoding all of it (the ids are then cut short).
  std::vector<int32_t> encode(const std::string& text, bool add_special, bool parse_special,
                              const std::vector<ByteRange>& plain, size_t max_tokens = SIZE_MAX) const;
  // At most this many tokens for `text_bytes` of text: each token stands for at most
  // as many bytes as the longest piece. 0 where the pipeline may drop or absorb text (a
  // normalizer, added tokens that absorb whitespace, fused or dropped unknown characters).
  size_t min_tokens(size_t text_bytes) const { return max_token_bytes_ == 0 ? 0 : text_bytes / max_token_bytes_; }

  // The bytes a token stands for; control and unknown tokens only when `special`.
  std::string token_to_piece(int32_t id, bool special = false) const;
  std::string decode(const std::vector<int32_t>& ids, bool special = false) const;

  const Vocab& vocab() const { return vocab_; }
  // One more id that ends generation (a model's generation_config.json lists them).
  void add_end_of_generation(int32_t id) {
    if (id >= 0 && id < vocab_.size() && !vocab_.is_eog(id)) vocab_.extra_eog.push_back(id);
  }
  int32_t n_vocab() const { return vocab_.size(); }

 private:
  struct Fragment {
    int32_t id;  // -1: plain text
    size_t start, len;
    bool untrusted = false;  // inside a `plain` range: control tokens are not matched
  };
  std::vector<Fragment> split_added_tokens(const std::string& text, bool parse_special,
                                           const std::vector<ByteRange>& plain) const;
  void encode_text(const std::string& text, bool after_special, bool first, std::vector<int32_t>& out,
                   size_t max_tokens) const;
  std::string decode_with_pipeline(const std::vector<int32_t>& ids, bool special) const;

  Vocab vocab_;
  TextPipeline pipeline_;
  std::vector<int32_t> special_by_length_;  // special tokens, longest text first
  size_t max_token_bytes_ = 0;              // the most text bytes one token stands for; 0: unknown
};

// Streams text token by token without ever splitting a UTF-8 character.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // Text that is complete after this token (may be empty while a character is pending);
  // `special`: a control token's text too (a format's markers, as harmony's <|channel|>).
  std::string push(int32_t id, bool special = false);
  // Whatever is still pending (an incomplete character at the end of generation).
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
};

}  // namespace autoglm
