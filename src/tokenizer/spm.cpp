#include <unordered_map>

#include "tokenizer/encoders.h"
#include "tokenizer/symbol_merge.h"

namespace autoglm {
namespace {

class SpmSession {
 public:
  SpmSession(const Vocab& vocab, const std::string& text) : vocab_(vocab), text_(text) {}

  void encode(std::vector<int32_t>& out) {
    // A pair may merge when the joined piece is a token; the higher its score, the sooner.
    const auto symbols =
        merge_symbols(text_, [&](size_t start, size_t left_len, size_t right_len) -> std::optional<double> {
          const std::string piece = text_.substr(start, left_len + right_len);
          const int32_t id = vocab_.find(piece);
          if (id < 0) return std::nullopt;
          merged_from_.emplace(piece, std::make_pair(Span{start, left_len}, Span{start + left_len, right_len}));
          return double(vocab_.scores[size_t(id)]);
        });
    for_each_symbol(symbols, [&](size_t start, size_t len) { resegment({start, len}, out); });
  }

 private:
  struct Span {
    size_t start, len;
  };

  // A piece that is not a token is split back into the pieces it was merged from,
  // and finally into byte tokens.
  void resegment(Span span, std::vector<int32_t>& out) {
    const std::string piece = text_.substr(span.start, span.len);
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
    const auto [left, right] = it->second;
    resegment(left, out);
    resegment(right, out);
  }

  const Vocab& vocab_;
  const std::string& text_;
  std::unordered_map<std::string, std::pair<Span, Span>> merged_from_;
};

}  // namespace

void spm_encode(const Vocab& vocab, const std::string& text, std::vector<int32_t>& out) {
  SpmSession(vocab, text).encode(out);
}

}  // namespace autoglm
