// Pre-tokenization: text is cut into words before the subword model sees them, by a
// chain of steps where each step cuts the pieces of the one before. GGUF files name
// a family of split regexes (tokenizer.ggml.pre); tokenizer.json spells the steps
// out (Split, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation,
// Sequence). Both become the same steps here.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "tokenizer/regex.h"

namespace autoglm {

// What a split does with the matched parts (Hugging Face SplitDelimiterBehavior).
enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  static Result<std::shared_ptr<const PreTokenizer>> for_name(const std::string& pre);
  // A tokenizer.json "pre_tokenizer" object; `where` names it in errors.
  static Result<std::shared_ptr<const PreTokenizer>> from_json(const nlohmann::json& j, const std::string& where);

  // `text` must be valid UTF-8. `first_fragment`: the text starts the input (not after an
  // added token), which Metaspace's prepend_scheme "first" asks about.
  std::vector<std::string> split(const std::string& text, bool first_fragment = true) const;

  // A ByteLevel step is present: words reach the model as GPT-2 byte-level strings.
  bool byte_level() const { return byte_level_; }
  // A step drops what it matches (Whitespace, WhitespaceSplit, a removing Split): text may vanish.
  bool removes_text() const {
    for (const Step& step : steps_)
      if (step.kind == Kind::kSplit && step.behavior == SplitBehavior::kRemoved) return true;
    return false;
  }

 private:
  enum class Kind { kSplit, kPrefixSpace, kMetaspace };
  enum class Prepend { kAlways, kFirst, kNever };
  struct Step {
    Kind kind = Kind::kSplit;
    std::shared_ptr<const Regex> regex;  // kSplit
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    std::string marker;  // kPrefixSpace: " "; kMetaspace: the replacement character
    Prepend prepend = Prepend::kAlways;
  };
  Status add_json_step(const nlohmann::json& j, const std::string& where);
  Status add_split(const std::string& pattern, bool literal, SplitBehavior behavior, bool invert = false);
  void add_split(std::shared_ptr<const Regex> regex, SplitBehavior behavior, bool invert);
  void apply(const Step& step, const std::string& piece, bool first, std::vector<std::string>& out) const;

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace autoglm
