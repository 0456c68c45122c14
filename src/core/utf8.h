// Small UTF-8 helpers shared by the tokenizers.
#pragma once

#include <cstdint>
#include <string>

namespace autoglm::utf8 {

// Length of the sequence that starts with byte b, judged by b alone (1 for stray bytes).
inline size_t sequence_length(unsigned char b) {
  static const uint8_t lengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lengths[b >> 4];
}

inline void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3f));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

// Decodes one well-formed code point at s[i]; returns its byte length, or 0 if malformed.
size_t decode(const std::string& s, size_t i, uint32_t& cp);

// Replaces every malformed sequence with U+FFFD.
std::string sanitize(const std::string& s);

// Number of bytes at the end of s that form an incomplete (possibly valid) sequence.
size_t incomplete_tail(const std::string& s);

// `text` with every occurrence of `from` (not empty) replaced by `to`.
std::string replace_all(const std::string& text, const std::string& from, const std::string& to);

// Calls fn(code_point, out) for each well-formed character of `text`, to append what it
// becomes; malformed bytes are copied to the result as they are.
template <typename Fn>
std::string map_code_points(const std::string& text, Fn fn) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = decode(text, i, cp);
    if (n == 0) {
      out += text[i++];
      continue;
    }
    fn(cp, out);
    i += n;
  }
  return out;
}

}  // namespace autoglm::utf8
