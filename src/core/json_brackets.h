// Walking the brackets of a JSON text without parsing it: [ { ] } outside strings (escapes
// honoured), one pass. Used to bound nesting before a parse and to find where a value ends.
#pragma once

#include <cstddef>
#include <string_view>

namespace autoglm {

// Calls on_bracket(index, depth) for each bracket from `from` on, with the depth after it
// (an opening bracket of the top level gives 1, its closing one 0); stops early when
// on_bracket returns false. Returns the index where it stopped, or text.size().
template <class OnBracket>
size_t scan_json_brackets(std::string_view text, size_t from, OnBracket&& on_bracket) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = from; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{' || c == ']' || c == '}') {
      depth += c == '[' || c == '{' ? 1 : -1;
      if (!on_bracket(i, depth)) return i;
    }
  }
  return text.size();
}

// The deepest nesting of arrays and objects in a JSON text: request data is copied and
// walked recursively after the parse, so its depth is bounded before.
inline int json_depth(std::string_view text) {
  int deepest = 0;
  scan_json_brackets(text, 0, [&](size_t, int depth) {
    deepest = depth > deepest ? depth : deepest;
    return true;
  });
  return deepest;
}

}  // namespace autoglm
