// Streaming parsers hold back text that may be the start of a marker ("<tool_call>", "</think>")
// until the next piece says what it is: this is how much of the end to hold.
#pragma once

#include <algorithm>
#include <string_view>

namespace autoglm {

// The length of the longest suffix of `text` that is a proper prefix of `marker`.
inline size_t partial_marker(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace autoglm
