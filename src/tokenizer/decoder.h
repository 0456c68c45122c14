// Token texts back to text, as tokenizer.json's "decoder" describes it: a chain of
// steps over the list of token strings (ByteLevel, Metaspace, ByteFallback, Fuse,
// Strip, Replace, Sequence), then joined.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "autoglm/status.h"

namespace autoglm {

class Decoder {
 public:
  // A tokenizer.json "decoder" object (null: token strings are joined as they are).
  static Result<std::shared_ptr<const Decoder>> from_json(const nlohmann::json& j, const std::string& where);

  // The text of a whole sequence of token strings.
  std::string decode(std::vector<std::string> tokens) const;
  // One token's bytes while streaming: steps that only trim the start of the whole
  // text (Strip, Metaspace's leading space) are skipped, and bytes are not validated.
  std::string decode_piece(const std::string& token) const;

 private:
  enum class Kind { kByteLevel, kMetaspace, kByteFallback, kFuse, kStrip, kReplace };
  struct Step {
    Kind kind;
    std::string pattern, content;   // kReplace; kMetaspace: pattern is the replacement character
    int start = 0, stop = 0;        // kStrip: characters to remove at each end
    bool strip_first_space = true;  // kMetaspace: prepend_scheme is not "never"
  };
  Status add_json_step(const nlohmann::json& j, const std::string& where);
  void apply(const Step& step, std::vector<std::string>& tokens, bool whole) const;

  std::vector<Step> steps_;
};

}  // namespace autoglm
