// Unicode regular expressions (PCRE2 with UTF and Unicode properties, JIT where
// available), as the tokenizer's split and replace rules need them.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autoglm/status.h"

namespace autoglm {

class Regex {
 public:
  // `literal`: the pattern is a plain string, not a regular expression; `caseless`: letters
  // match either case.
  static Result<std::shared_ptr<const Regex>> compile(const std::string& pattern, bool literal = false,
                                                      bool caseless = false);
  ~Regex();

  // Every non-overlapping, non-empty match as [begin, end) byte ranges, left to right.
  // `text` must be valid UTF-8.
  std::vector<std::pair<size_t, size_t>> find_all(const std::string& text) const;

  // `text` with every match replaced by `with`.
  std::string replace_all(const std::string& text, const std::string& with) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code
};

}  // namespace autoglm
