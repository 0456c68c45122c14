// Hugging Face tokenizers: tokenizer.json (the tokenizers library's format: a BPE model
// with its vocabulary and merges, normalizer, pre-tokenizer, decoder, post-processor and
// added tokens) with tokenizer_config.json beside it (special tokens, add_bos_token,
// chat_template, clean_up_tokenization_spaces).
#pragma once

#include <memory>
#include <string>

#include "autoglm/status.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {

// `dir` holds tokenizer.json and, optionally, tokenizer_config.json. Errors name the
// file and the field.
Result<std::unique_ptr<Tokenizer>> load_hf_tokenizer(const std::string& dir);

// The same from the two files' texts (tests); `config_text` may be empty.
Result<std::unique_ptr<Tokenizer>> parse_hf_tokenizer(const std::string& tokenizer_text, const std::string& config_text,
                                                      const std::string& where);

}  // namespace autoglm
