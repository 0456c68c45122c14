#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <string_view>

#include "core/utf8.h"
#include "tokenizer/decoder.h"
#include "tokenizer/encoders.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pretokenize.h"

namespace autoglm {
namespace {

const char kSpaceMarker[] = "\xe2\x96\x81";  // U+2581, SentencePiece's visible space

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool is_word_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// Hugging Face's clean_up_tokenization: no space before punctuation and English contractions.
std::string clean_up_spaces(std::string text) {
  static const std::pair<const char*, const char*> rules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : rules) {
    const std::string f = from, t = to;
    for (size_t pos = 0; (pos = text.find(f, pos)) != std::string::npos; pos += t.size())
      text.replace(pos, f.size(), t);
  }
  return text;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& file) {
  AUTOGLM_ASSIGN_OR_RETURN(Vocab vocab, load_vocab(file));
  TextPipeline pipeline;
  if (vocab.kind == TokenizerKind::kBpe) {
    auto p = PreTokenizer::for_name(vocab.pre);
    if (!p) return Status(p.status().code(), file.path() + ": " + p.status().message());
    pipeline.pre = std::move(p).value();
    // Llama 3's tokenizer_config asks for clean_up_tokenization_spaces; llama.cpp keys it on the pre-tokenizer.
    pipeline.clean_up_spaces = vocab.pre == "llama3" || vocab.pre == "llama-bpe" || vocab.pre == "smaug-bpe";
  }
  return std::make_unique<Tokenizer>(std::move(vocab), std::move(pipeline));
}

Tokenizer::Tokenizer(Vocab vocab, TextPipeline pipeline) : vocab_(std::move(vocab)), pipeline_(std::move(pipeline)) {
  for (int32_t id = 0; id < vocab_.size(); ++id)
    if (vocab_.is_special(id) && !vocab_.pieces[size_t(id)].empty()) special_by_length_.push_back(id);
  std::stable_sort(special_by_length_.begin(), special_by_length_.end(), [&](int32_t a, int32_t b) {
    return vocab_.pieces[size_t(a)].size() > vocab_.pieces[size_t(b)].size();
  });
  // A piece stands for at most its own bytes (SPM's marker and byte-level BPE's characters are
  // longer than the bytes they stand for); an unknown character, up to 4 bytes, is one unk or
  // byte tokens. Only where no text can vanish.
  const bool all_bytes =
      std::all_of(vocab_.byte_tokens.begin(), vocab_.byte_tokens.end(), [](int32_t id) { return id >= 0; }) &&
      (vocab_.kind == TokenizerKind::kSpm || vocab_.byte_fallback);
  bool byte_level_complete = vocab_.kind == TokenizerKind::kBpe && vocab_.byte_level;  // every byte's character
  for (int b = 0; b < 256 && byte_level_complete; ++b)
    byte_level_complete = vocab_.find(byte_to_unicode(uint8_t(b))) >= 0;
  const bool nothing_vanishes =
      !pipeline_.normalizer && pipeline_.added_rules.empty() && !(pipeline_.pre && pipeline_.pre->removes_text()) &&
      !(vocab_.fuse_unk && vocab_.kind == TokenizerKind::kBpe) && (vocab_.unk >= 0 || all_bytes || byte_level_complete);
  if (nothing_vanishes) {
    max_token_bytes_ = 4;
    for (const std::string& piece : vocab_.pieces) max_token_bytes_ = std::max(max_token_bytes_, piece.size());
  }
}

void Tokenizer::encode_text(const std::string& text, bool after_special, bool first, std::vector<int32_t>& out,
                            size_t max_tokens) const {
  if (vocab_.kind == TokenizerKind::kSpm) {
    const bool prefix = vocab_.add_space_prefix && after_special;
    spm_encode(vocab_, utf8::replace_all(prefix ? " " + text : text, " ", kSpaceMarker), out);
    return;
  }
  std::string normalized = utf8::sanitize(text);
  if (pipeline_.normalizer) normalized = pipeline_.normalizer->apply(normalized);
  if (normalized.empty()) return;
  if (!pipeline_.pre) {
    bpe_encode_word(vocab_, normalized, out);
    return;
  }
  for (const std::string& word : pipeline_.pre->split(normalized, first)) {
    if (out.size() > max_tokens) return;
    bpe_encode_word(vocab_, word, out);
  }
}

// Fragments of plain text and the added tokens found between them (longest token first).
// Each token is searched for within the plain fragments only, so the work is the text's
// length times the number of added tokens, however dense the markers are.
std::vector<Tokenizer::Fragment> Tokenizer::split_added_tokens(const std::string& text, bool parse_special,
                                                               const std::vector<ByteRange>& plain) const {
  std::vector<Fragment> fragments;
  size_t at = 0;
  for (const ByteRange& r : plain) {
    if (r.begin < at || r.end > text.size() || r.begin >= r.end) continue;  // not sorted, or empty
    if (r.begin > at) fragments.push_back({-1, at, r.begin - at});
    fragments.push_back({-1, r.begin, r.end - r.begin, true});
    at = r.end;
  }
  if (at < text.size()) fragments.push_back({-1, at, text.size() - at});
  for (int32_t special : special_by_length_) {
    const TokenType type = vocab_.types[size_t(special)];
    const bool control = type != TokenType::kUserDefined;
    if (!parse_special && control) continue;
    const std::string& piece = vocab_.pieces[size_t(special)];
    const auto rules_it = pipeline_.added_rules.find(special);
    const AddedTokenRules rules = rules_it == pipeline_.added_rules.end() ? AddedTokenRules{} : rules_it->second;
    std::vector<Fragment> next;
    for (const Fragment& f : fragments) {
      if (f.id >= 0 || (control && f.untrusted)) {
        next.push_back(f);
        continue;
      }
      size_t pos = f.start;
      const size_t end = f.start + f.len;
      const std::string_view fragment(text.data() + f.start, f.len);  // search this fragment only
      for (size_t from = f.start;;) {
        const size_t found = fragment.find(piece, from - f.start);
        if (found == std::string_view::npos) break;
        const size_t hit = f.start + found;
        size_t b = hit, e = hit + piece.size();
        if (rules.single_word && ((b > f.start && is_word_byte(text[b - 1])) || (e < end && is_word_byte(text[e])))) {
          from = hit + 1;
          continue;
        }
        if (rules.lstrip)
          while (b > pos && is_ascii_space(text[b - 1])) --b;
        if (rules.rstrip)
          while (e < end && is_ascii_space(text[e])) ++e;
        if (b > pos) next.push_back({-1, pos, b - pos, f.untrusted});
        next.push_back({special, b, e - b});
        pos = from = e;
      }
      if (pos < end) next.push_back({-1, pos, end - pos, f.untrusted});
    }
    fragments = std::move(next);
  }
  return fragments;
}

std::vector<int32_t> Tokenizer::encode(const std::string& text, bool add_special, bool parse_special) const {
  return encode(text, add_special, parse_special, {});
}

std::vector<int32_t> Tokenizer::encode(const std::string& text, bool add_special, bool parse_special,
                                       const std::vector<ByteRange>& plain, size_t max_tokens) const {
  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos);
  bool after_special = true;
  bool first = true;
  const auto fragments = split_added_tokens(text, parse_special, plain);
  for (size_t i = 0; i < fragments.size() && out.size() <= max_tokens; ++i) {
    const Fragment& f = fragments[i];
    if (f.id >= 0) {
      out.push_back(f.id);
      after_special = true;
      first = false;
      continue;
    }
    // Neighbouring text fragments (a plain range beside trusted text) are one text.
    size_t len = f.len;
    while (i + 1 < fragments.size() && fragments[i + 1].id < 0) len += fragments[++i].len;
    encode_text(text.substr(f.start, len), after_special, first, out, max_tokens);
    after_special = false;
    first = false;
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
    default:
      if (pipeline_.decoder) return pipeline_.decoder->decode_piece(text);
      return vocab_.kind == TokenizerKind::kSpm ? utf8::replace_all(text, kSpaceMarker, " ") : unicode_to_bytes(text);
  }
}

std::string Tokenizer::decode_with_pipeline(const std::vector<int32_t>& ids, bool special) const {
  std::vector<std::string> tokens;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_.size()) continue;
    const TokenType type = vocab_.types[size_t(id)];
    if (type == TokenType::kUnused || ((type == TokenType::kControl || type == TokenType::kUnknown) && !special))
      continue;
    tokens.push_back(vocab_.pieces[size_t(id)]);
  }
  std::string text = pipeline_.decoder->decode(std::move(tokens));
  return pipeline_.clean_up_spaces ? clean_up_spaces(std::move(text)) : text;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool special) const {
  if (pipeline_.decoder) return decode_with_pipeline(ids, special);
  std::string out;
  for (int32_t id : ids) out += token_to_piece(id, special);
  return pipeline_.clean_up_spaces ? clean_up_spaces(std::move(out)) : out;
}

std::string IncrementalDetokenizer::push(int32_t id, bool special) {
  pending_ += tokenizer_.token_to_piece(id, special);
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
