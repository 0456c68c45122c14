// From sampled tokens to the text a client may see: end-of-generation tokens end
// the stream, characters are never split, stop strings are held back and cut.
// The engine and the single-sequence generator share it.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "engine/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {

class TextStream {
 public:
  // `visible_control`: control tokens whose text is shown (a reply format's markers); others
  // show nothing.
  TextStream(const Tokenizer& tokenizer, std::vector<std::string> stops, bool stop_at_eog = true,
             std::vector<int32_t> visible_control = {})
      : tokenizer_(tokenizer),
        detok_(tokenizer),
        stops_(std::move(stops)),
        stop_at_eog_(stop_at_eog),
        visible_control_(std::move(visible_control)) {}

  // Text that became final with this token; ended() is true once an EOS/EOT or a stop string was seen.
  std::string push(int32_t token) {
    if (stop_at_eog_ && tokenizer_.vocab().is_eog(token)) {
      ended_ = true;
      return "";
    }
    const bool shown = std::find(visible_control_.begin(), visible_control_.end(), token) != visible_control_.end();
    std::string text = stops_.push(detok_.push(token, shown));
    ended_ = ended_ || stops_.stopped();
    return text;
  }
  // At the end of generation: whatever was held back, unless a stop string cut it.
  std::string flush() {
    if (stops_.stopped()) return "";
    std::string tail = stops_.push(detok_.flush());
    if (!stops_.stopped()) tail += stops_.flush();
    return tail;
  }
  bool ended() const { return ended_; }
  // The stop string that ended the text ("" when none did).
  const std::string& stop_sequence() const { return stops_.matched(); }

 private:
  const Tokenizer& tokenizer_;
  IncrementalDetokenizer detok_;
  StopMatcher stops_;
  bool stop_at_eog_;
  std::vector<int32_t> visible_control_;
  bool ended_ = false;
};

}  // namespace autoglm
