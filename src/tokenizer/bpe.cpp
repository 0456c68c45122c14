#include <array>
#include <queue>

#include "tokenizer/encoders.h"
#include "tokenizer/utf8.h"

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

struct Symbol {
  int prev;
  int next;
  size_t start;
  size_t len;
};

struct Bigram {
  int left;
  int right;
  int rank;
  size_t len;
  // Lowest rank first; on ties the leftmost pair.
  bool operator<(const Bigram& o) const { return rank > o.rank || (rank == o.rank && left > o.left); }
};

}  // namespace

const std::string& byte_to_unicode(uint8_t b) {
  return byte_map().to_unicode[b];
}

std::string unicode_to_bytes(const std::string& text) {
  const ByteMap& map = byte_map();
  std::string out;
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = utf8::decode(text, i, cp);
    if (n == 0) {
      out += text[i++];
      continue;
    }
    auto it = map.to_byte.find(cp);
    if (it != map.to_byte.end())
      out += char(it->second);
    else
      out.append(text, i, n);
    i += n;
  }
  return out;
}

void bpe_encode_word(const Vocab& vocab, const std::string& word, std::vector<int32_t>& out) {
  std::string text;
  for (unsigned char c : word) text += byte_to_unicode(c);
  if (vocab.ignore_merges) {
    const int32_t id = vocab.find(text);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols;
  for (size_t offs = 0; offs < text.size();) {
    const size_t len = std::min(text.size() - offs, utf8::sequence_length(static_cast<unsigned char>(text[offs])));
    const int index = int(symbols.size());
    symbols.push_back({index - 1, offs + len < text.size() ? index + 1 : -1, offs, len});
    offs += len;
  }
  std::priority_queue<Bigram> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[size_t(left)];
    const Symbol& r = symbols[size_t(right)];
    auto it = vocab.merge_rank.find(text.substr(l.start, l.len) + " " + text.substr(r.start, r.len));
    if (it == vocab.merge_rank.end()) return;
    queue.push({left, right, it->second, l.len + r.len});
  };
  for (int i = 1; i < int(symbols.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& left = symbols[size_t(b.left)];
    Symbol& right = symbols[size_t(b.right)];
    if (left.len == 0 || right.len == 0 || left.len + right.len != b.len) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[size_t(right.next)].prev = b.left;
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[size_t(i)].next) {
    const std::string piece = text.substr(symbols[size_t(i)].start, symbols[size_t(i)].len);
    const int32_t id = vocab.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // No such token: fall back to its characters one by one.
    for (size_t offs = 0; offs < piece.size();) {
      const size_t len = std::min(piece.size() - offs, utf8::sequence_length(static_cast<unsigned char>(piece[offs])));
      const int32_t cid = vocab.find(piece.substr(offs, len));
      if (cid >= 0) out.push_back(cid);
      offs += len;
    }
  }
}

}  // namespace autoglm
