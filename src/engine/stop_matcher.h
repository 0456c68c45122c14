// Finds stop strings in streamed text. Text that might still turn into a stop
// string is held back, so a client never sees part of a stop string.
#pragma once

#include <string>
#include <vector>

namespace autoglm {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Adds generated text; returns what may be shown now. After a stop string
  // is found, stopped() is true and nothing from the stop string on is returned.
  std::string push(const std::string& text);
  // At the end of generation: the held-back text (empty once stopped).
  std::string flush();
  bool stopped() const { return stopped_; }
  // The stop string that ended the text ("" until one did).
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace autoglm
