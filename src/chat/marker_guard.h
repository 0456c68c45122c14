// Control-token markers (<|im_start|>, <|eot_id|>, <s>...) written in request or tool text
// must stay text: a user or a tool result must not forge a system turn or end the assistant's.
// Before rendering, markers in untrusted strings become placeholders the template copies like
// any text; after rendering, the placeholders become the markers again and their byte ranges
// are tokenized with special-token parsing off. The template's own markup is untouched.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace autoglm {

// A vocabulary's control-token pieces, found once.
class ControlMarkers {
 public:
  explicit ControlMarkers(const Vocab& vocab);

 private:
  friend class MarkerGuard;
  std::vector<std::string> markers_;                 // control-token pieces, longest first
  std::array<std::vector<uint32_t>, 256> by_first_;  // indexes into markers_ by first byte
};

// One prompt's hidden markers.
class MarkerGuard {
 public:
  explicit MarkerGuard(const ControlMarkers& markers) : markers_(markers) {}

  // Replaces the markers in every string of `j` (keys too) with placeholders; false when
  // there were none (j unchanged).
  bool hide(nlohmann::ordered_json& j);
  // The rendered text with the placeholders turned back into their markers; `plain` gets
  // the byte ranges of those markers, in order.
  std::string restore(const std::string& rendered, std::vector<Tokenizer::ByteRange>& plain) const;

 private:
  bool hide_in(std::string& s);

  const ControlMarkers& markers_;
  std::vector<std::string> hidden_;  // the marker behind each placeholder, by index
};

}  // namespace autoglm
