#include <algorithm>
#include <array>

#include "core/utf8.h"
#include "tokenizer/encoders.h"
#include "tokenizer/symbol_merge.h"

namespace autoglm {
namespace {

struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::unordered_map<uint32_t, uint8_t> to_byte;
  ByteMap() {
    // Printable Latin-1 bytes stand for themselves; the rest map to 256, 257, ...
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      const uint32_t cp = printable ? uint32_t(b) : uint32_t(next++);
      utf8::append(to_unicode[size_t(b)], cp);
      to_byte[cp] = uint8_t(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t b) {
  return byte_map().to_unicode[b];
}

std::string unicode_to_bytes(const std::string& text) {
  const ByteMap& map = byte_map();
  return utf8::map_code_points(text, [&](uint32_t cp, std::string& out) {
    auto it = map.to_byte.find(cp);
    if (it != map.to_byte.end())
      out += char(it->second);
    else
      utf8::append(out, cp);
  });
}

namespace {

// A symbol that is no token: its characters one by one, then byte tokens or unk.
void encode_unknown_symbol(const Vocab& vocab, const std::string& piece, std::vector<int32_t>& out) {
  for (size_t offs = 0; offs < piece.size();) {
    const size_t n = std::min(piece.size() - offs, utf8::sequence_length(static_cast<unsigned char>(piece[offs])));
    const int32_t cid = vocab.find(piece.substr(offs, n));
    bool have_bytes = vocab.byte_fallback;
    for (size_t k = 0; k < n && have_bytes; ++k)
      have_bytes = vocab.byte_tokens[static_cast<unsigned char>(piece[offs + k])] >= 0;
    if (cid >= 0) {
      out.push_back(cid);
    } else if (have_bytes) {
      for (size_t k = 0; k < n; ++k) out.push_back(vocab.byte_tokens[static_cast<unsigned char>(piece[offs + k])]);
    } else if (vocab.unk >= 0) {
      out.push_back(vocab.unk);
    }
    offs += n;
  }
}

}  // namespace

void bpe_encode_word(const Vocab& vocab, const std::string& word, std::vector<int32_t>& out) {
  std::string text;
  if (vocab.byte_level)
    for (unsigned char c : word) text += byte_to_unicode(c);
  else
    text = word;
  if (vocab.ignore_merges) {
    const int32_t id = vocab.find(text);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  // A pair may merge when "left right" is a merge rule; the lower its rank, the sooner.
  const auto symbols =
      merge_symbols(text, [&](size_t start, size_t left_len, size_t right_len) -> std::optional<double> {
        auto it = vocab.merge_rank.find(text.substr(start, left_len) + " " + text.substr(start + left_len, right_len));
        if (it == vocab.merge_rank.end()) return std::nullopt;
        return -double(it->second);
      });
  const size_t first = out.size();
  for_each_symbol(symbols, [&](size_t start, size_t len) {
    const std::string piece = text.substr(start, len);
    const int32_t id = vocab.find(piece);
    if (id >= 0)
      out.push_back(id);
    else
      encode_unknown_symbol(vocab, piece, out);
  });
  if (vocab.fuse_unk && vocab.unk >= 0) {  // a run of unknown characters in the word is one unk
    auto from = out.begin() + long(first);
    out.erase(std::unique(from, out.end(), [&](int32_t a, int32_t b) { return a == vocab.unk && b == vocab.unk; }),
              out.end());
  }
}

}  // namespace autoglm
