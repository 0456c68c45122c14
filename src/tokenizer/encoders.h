// The two subword algorithms, each over one fragment of plain text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/vocab.h"

namespace autoglm {

// SentencePiece-style: highest-score merges of adjacent pieces, then byte fallback
// (<0xNN>) for pieces that are not tokens. `text` already has spaces as U+2581.
void spm_encode(const Vocab& vocab, const std::string& text, std::vector<int32_t>& out);

// Byte-level BPE over one pre-tokenized word given as raw UTF-8 bytes.
void bpe_encode_word(const Vocab& vocab, const std::string& word, std::vector<int32_t>& out);

// GPT-2 byte-to-unicode mapping: each byte as the UTF-8 of its stand-in code point.
const std::string& byte_to_unicode(uint8_t b);
// Inverse mapping of a whole token text; characters outside the map are kept as UTF-8.
std::string unicode_to_bytes(const std::string& text);

}  // namespace autoglm
