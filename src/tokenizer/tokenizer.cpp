#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "tokenizer/encoders.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/utf8.h"

namespace autoglm {
namespace {

const char kSpaceMarker[] = "\xe2\x96\x81";  // U+2581, SentencePiece's visible space

std::string escape_spaces(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (char c : text) {
    if (c == ' ')
      out += kSpaceMarker;
    else
      out += c;
  }
  return out;
}

std::string unescape_spaces(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 3, kSpaceMarker) == 0) {
      out += ' ';
      i += 3;
    } else {
      out += text[i++];
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& file) {
  AUTOGLM_ASSIGN_OR_RETURN(Vocab vocab, load_vocab(file));
  std::shared_ptr<const PreTokenizer> pre;
  if (vocab.kind == TokenizerKind::kBpe) {
    auto p = PreTokenizer::for_name(vocab.pre);
    if (!p) return Status(p.status().code(), file.path() + ": " + p.status().message());
    pre = std::move(p).value();
  }
  return std::make_unique<Tokenizer>(std::move(vocab), std::move(pre));
}

Tokenizer::Tokenizer(Vocab vocab, std::shared_ptr<const PreTokenizer> pre)
    : vocab_(std::move(vocab)), pre_(std::move(pre)) {
  for (int32_t id = 0; id < vocab_.size(); ++id)
    if (vocab_.is_special(id) && !vocab_.pieces[size_t(id)].empty()) special_by_length_.push_back(id);
  std::stable_sort(special_by_length_.begin(), special_by_length_.end(), [&](int32_t a, int32_t b) {
    return vocab_.pieces[size_t(a)].size() > vocab_.pieces[size_t(b)].size();
  });
}

void Tokenizer::encode_text(const std::string& text, bool after_special, std::vector<int32_t>& out) const {
  if (vocab_.kind == TokenizerKind::kSpm) {
    const bool prefix = vocab_.add_space_prefix && after_special;
    spm_encode(vocab_, escape_spaces(prefix ? " " + text : text), out);
    return;
  }
  for (const std::string& word : pre_->split(utf8::sanitize(text))) bpe_encode_word(vocab_, word, out);
}

std::vector<int32_t> Tokenizer::encode(const std::string& text, bool add_special, bool parse_special) const {
  // Fragments: plain text (id < 0, with its range) or an already-recognised token.
  struct Fragment {
    int32_t id;
    size_t start, len;
  };
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({-1, 0, text.size()});
  for (int32_t special : special_by_length_) {
    const TokenType type = vocab_.types[size_t(special)];
    if (!parse_special && type != TokenType::kUserDefined) continue;
    const std::string& piece = vocab_.pieces[size_t(special)];
    std::vector<Fragment> next;
    for (const Fragment& f : fragments) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = f.start;
      const size_t end = f.start + f.len;
      while (pos < end) {
        const size_t hit = text.find(piece, pos);
        if (hit == std::string::npos || hit + piece.size() > end) break;
        if (hit > pos) next.push_back({-1, pos, hit - pos});
        next.push_back({special, hit, piece.size()});
        pos = hit + piece.size();
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    fragments = std::move(next);
  }

  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos);
  bool after_special = true;
  for (const Fragment& f : fragments) {
    if (f.id >= 0) {
      out.push_back(f.id);
      after_special = true;
    } else {
      encode_text(text.substr(f.start, f.len), after_special, out);
      after_special = false;
    }
  }
  if (add_special && vocab_.add_eos) out.push_back(vocab_.eos);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  if (id < 0 || id >= vocab_.size()) return "";
  const std::string& text = vocab_.pieces[size_t(id)];
  switch (vocab_.types[size_t(id)]) {
    case TokenType::kControl:
    case TokenType::kUnknown: return special ? text : "";
    case TokenType::kUserDefined: return text;
    case TokenType::kUnused: return "";
    case TokenType::kByte:
      if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 && hex_value(text[3]) >= 0 && hex_value(text[4]) >= 0)
        return std::string(1, char(hex_value(text[3]) * 16 + hex_value(text[4])));
      return "";
    default: return vocab_.kind == TokenizerKind::kSpm ? unescape_spaces(text) : unicode_to_bytes(text);
  }
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool special) const {
  std::string out;
  for (int32_t id : ids) out += token_to_piece(id, special);
  return out;
}

std::string IncrementalDetokenizer::push(int32_t id) {
  pending_ += tokenizer_.token_to_piece(id);
  const size_t keep = utf8::incomplete_tail(pending_);
  std::string ready = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return ready;
}

std::string IncrementalDetokenizer::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace autoglm
