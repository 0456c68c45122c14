#include "media/data_url.h"

#include <algorithm>
#include <cctype>

#include "core/base64.h"

namespace autoglm {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A data URL's payload without ;base64: percent-encoded bytes.
Result<std::string> percent_decoded(std::string_view data, int64_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < data.size(); ++i) {
    if (int64_t(out.size()) >= max_bytes)
      return invalid_argument("the data URL holds more than " + std::to_string(max_bytes) + " bytes");
    if (data[i] != '%') {
      out += data[i];
      continue;
    }
    const int hi = i + 2 < data.size() ? hex_value(data[i + 1]) : -1, lo = hi >= 0 ? hex_value(data[i + 2]) : -1;
    if (lo < 0) return invalid_argument("the data URL has a bad percent escape at byte " + std::to_string(i));
    out += char(hi * 16 + lo);
    i += 2;
  }
  return out;
}

}  // namespace

Result<DataUrl> parse_data_url(std::string_view url, int64_t max_bytes) {
  if (url.size() < 5 || lower(url.substr(0, 5)) != "data:") return invalid_argument("not a data URL (no 'data:')");
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) return invalid_argument("the data URL has no ',' before its data");
  std::string_view header = url.substr(5, comma - 5);
  bool base64 = false;
  if (header.size() >= 7 && lower(header.substr(header.size() - 7)) == ";base64") {
    base64 = true;
    header.remove_suffix(7);
  }
  DataUrl out;
  out.media_type = lower(header.substr(0, header.find(';')));
  if (out.media_type.empty()) out.media_type = "text/plain";
  const std::string_view data = url.substr(comma + 1);
  if (!base64) {
    AUTOGLM_ASSIGN_OR_RETURN(out.bytes, percent_decoded(data, max_bytes));
    return out;
  }
  if (int64_t(data.size()) / 4 * 3 > max_bytes + 3)  // refused before decoding
    return invalid_argument("the data URL holds more than " + std::to_string(max_bytes) + " bytes");
  auto bytes = base64_decode(data, size_t(max_bytes));
  if (!bytes)
    return invalid_argument("the data URL's base64 is malformed or holds more than " + std::to_string(max_bytes) +
                            " bytes");
  out.bytes = std::move(*bytes);
  return out;
}

}  // namespace autoglm
