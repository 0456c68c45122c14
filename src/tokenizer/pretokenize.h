// BPE pre-tokenization: the text is split into words by a chain of regexes
// (each one splits the pieces of the previous one; unmatched gaps stay pieces),
// chosen by the GGUF pre-tokenizer name. Regexes use Unicode classes (PCRE2).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autoglm/status.h"

namespace autoglm {

class PreTokenizer {
 public:
  static Result<std::shared_ptr<const PreTokenizer>> for_name(const std::string& pre);
  ~PreTokenizer();

  // `text` must be valid UTF-8.
  std::vector<std::string> split(const std::string& text) const;

 private:
  struct Pattern;
  std::vector<std::unique_ptr<Pattern>> patterns_;
};

}  // namespace autoglm
