#include "model/mrope.h"

#include <algorithm>

namespace autoglm {

MropePositions mrope_positions(int64_t n_tokens, const std::vector<ImageSpan>& spans) {
  MropePositions out;
  out.positions.reserve(size_t(3 * n_tokens));
  const auto push = [&](int64_t t, int64_t h, int64_t w) {
    out.positions.push_back(int32_t(t));
    out.positions.push_back(int32_t(h));
    out.positions.push_back(int32_t(w));
  };
  int64_t next = 0;  // the position of the next text token
  size_t span = 0;
  for (int64_t i = 0; i < n_tokens;) {
    if (span < spans.size() && spans[span].first == i) {
      const ImageSpan& s = spans[span++];
      for (int64_t k = 0; k < s.n_tokens(); ++k) push(next, next + k / s.cols, next + k % s.cols);
      i += s.n_tokens();
      next += std::max(s.rows, s.cols);
      continue;
    }
    push(next, next, next);
    ++next;
    ++i;
  }
  out.delta = next - n_tokens;
  return out;
}

}  // namespace autoglm
