// Text normalization before pre-tokenization, as tokenizer.json describes it:
// NFC, NFD, NFKC, NFKD (utf8proc), Lowercase, Prepend, Replace, Strip, Sequence.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "tokenizer/regex.h"

namespace autoglm {

class Normalizer {
 public:
  // A tokenizer.json "normalizer" object (null: no normalization); `where` names it in errors.
  static Result<std::shared_ptr<const Normalizer>> from_json(const nlohmann::json& j, const std::string& where);

  // `text` must be valid UTF-8.
  std::string apply(const std::string& text) const;
  bool empty() const { return steps_.empty(); }

 private:
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kPrepend, kReplace, kStrip };
  struct Step {
    Kind kind;
    std::string text;                    // kPrepend: the prefix; kReplace: the replacement
    std::shared_ptr<const Regex> regex;  // kReplace
    bool left = false, right = false;    // kStrip
  };
  Status add_json_step(const nlohmann::json& j, const std::string& where);
  static std::string apply_step(const Step& step, const std::string& text);

  std::vector<Step> steps_;
};

}  // namespace autoglm
