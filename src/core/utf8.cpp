#include "core/utf8.h"

namespace autoglm::utf8 {

size_t decode(const std::string& s, size_t i, uint32_t& cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const size_t n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1f) : n == 3 ? (b0 & 0x0f) : (b0 & 0x07);
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  static const uint32_t min_for_length[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_for_length[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

std::string sanitize(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    const size_t n = decode(s, i, cp);
    if (n == 0) {
      append(out, 0xfffd);
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

size_t incomplete_tail(const std::string& s) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto b = static_cast<unsigned char>(s[s.size() - back]);
    if ((b & 0xc0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const size_t need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

std::string replace_all(const std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  std::string out;
  size_t done = 0;
  for (size_t hit; (hit = text.find(from, done)) != std::string::npos; done = hit + from.size())
    out.append(text, done, hit - done) += to;
  return out.append(text, done, std::string::npos);
}

}  // namespace autoglm::utf8
