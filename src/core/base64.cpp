#include "core/base64.h"

#include <array>
#include <cstdint>

namespace autoglm {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> decoding_table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (int i = 0; i < 64; ++i) t[size_t(uint8_t(kAlphabet[i]))] = int8_t(i);
  return t;
}

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

}  // namespace

std::string base64_encode(const void* data, size_t n) {
  const auto* b = static_cast<const uint8_t*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t chunk =
        uint32_t(b[i]) << 16 | (i + 1 < n ? uint32_t(b[i + 1]) << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
    out += kAlphabet[(chunk >> 18) & 63];
    out += kAlphabet[(chunk >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(chunk >> 6) & 63] : '=';
    out += i + 2 < n ? kAlphabet[chunk & 63] : '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text, size_t max_bytes) {
  static constexpr std::array<int8_t, 256> kTable = decoding_table();
  std::string out;
  uint32_t chunk = 0;
  int have = 0, padding = 0;
  for (char c : text) {
    if (is_space(c)) continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    const int8_t v = kTable[size_t(uint8_t(c))];
    if (v < 0 || padding > 0) return std::nullopt;  // not base64, or data after the padding
    chunk = chunk << 6 | uint32_t(v);
    if (++have == 4) {
      if (out.size() + 3 > max_bytes) return std::nullopt;
      out += char(chunk >> 16);
      out += char(chunk >> 8 & 0xff);
      out += char(chunk & 0xff);
      chunk = 0;
      have = 0;
    }
  }
  if (have == 1 || padding > 2 || (padding > 0 && have + padding != 4)) return std::nullopt;
  if (out.size() + (have == 0 ? 0 : size_t(have - 1)) > max_bytes) return std::nullopt;
  if (have >= 2) out += char(chunk >> (have == 2 ? 4 : 10));
  if (have == 3) out += char(chunk >> 2 & 0xff);
  return out;
}

}  // namespace autoglm
