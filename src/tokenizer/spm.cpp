#include <queue>
#include <unordered_map>

#include "tokenizer/encoders.h"
#include "tokenizer/utf8.h"

namespace autoglm {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t start;
  size_t len;  // 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t len;
  // Highest score first; on ties the leftmost pair.
  bool operator<(const Bigram& o) const { return score < o.score || (score == o.score && left > o.left); }
};

class SpmSession {
 public:
  SpmSession(const Vocab& vocab, const std::string& text) : vocab_(vocab), text_(text) {}

  void encode(std::vector<int32_t>& out) {
    for (size_t offs = 0; offs < text_.size();) {
      const size_t len = std::min(text_.size() - offs, utf8::sequence_length(static_cast<unsigned char>(text_[offs])));
      const int index = int(symbols_.size());
      symbols_.push_back({index - 1, offs + len < text_.size() ? index + 1 : -1, offs, len});
      offs += len;
    }
    for (int i = 1; i < int(symbols_.size()); ++i) try_add_bigram(i - 1, i);
    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[size_t(b.left)];
      Symbol& right = symbols_[size_t(b.right)];
      if (left.len == 0 || right.len == 0 || left.len + right.len != b.len) continue;  // stale
      left.len += right.len;
      right.len = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[size_t(right.next)].prev = b.left;
      try_add_bigram(left.prev, b.left);
      try_add_bigram(b.left, left.next);
    }
    for (int i = symbols_.empty() ? -1 : 0; i >= 0; i = symbols_[size_t(i)].next)
      resegment(symbols_[size_t(i)].start, symbols_[size_t(i)].len, out);
  }

 private:
  void try_add_bigram(int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols_[size_t(left)];
    const Symbol& r = symbols_[size_t(right)];
    const std::string piece = text_.substr(l.start, l.len + r.len);
    const int32_t id = vocab_.find(piece);
    if (id < 0) return;
    queue_.push({left, right, vocab_.scores[size_t(id)], piece.size()});
    merged_from_.emplace(piece, std::make_pair(std::make_pair(l.start, l.len), std::make_pair(r.start, r.len)));
  }

  // A piece that is not a token is split back into the pieces it was merged from,
  // and finally into byte tokens.
  void resegment(size_t start, size_t len, std::vector<int32_t>& out) {
    const std::string piece = text_.substr(start, len);
    const int32_t id = vocab_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    auto it = merged_from_.find(piece);
    if (it == merged_from_.end()) {
      for (unsigned char c : piece) {
        const int32_t byte_id = vocab_.byte_tokens[c];
        if (byte_id >= 0)
          out.push_back(byte_id);
        else if (vocab_.unk >= 0)
          out.push_back(vocab_.unk);
      }
      return;
    }
    const auto [l, r] = it->second;
    resegment(l.first, l.second, out);
    resegment(r.first, r.second, out);
  }

  const Vocab& vocab_;
  const std::string& text_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram> queue_;
  std::unordered_map<std::string, std::pair<std::pair<size_t, size_t>, std::pair<size_t, size_t>>> merged_from_;
};

}  // namespace

void spm_encode(const Vocab& vocab, const std::string& text, std::vector<int32_t>& out) {
  SpmSession(vocab, text).encode(out);
}

}  // namespace autoglm
