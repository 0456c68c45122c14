// GBNF text (before the first NUL byte) -> a grammar under the default limits, then the
// bytes after the NUL fed through its matcher one at a time.
#include "sample/grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string text = input.substr(0, split);
  auto grammar = autoglm::Grammar::parse(text);
  if (!grammar) return 0;
  autoglm::GrammarState state(*grammar);
  state.accepting();
  state.distance_to_accept();
  if (split == std::string::npos) return 0;
  for (size_t i = split + 1; i < input.size() && !state.dead(); ++i) {
    state = state.advance_byte(uint8_t(input[i]));
    state.can_continue();
    state.key();
  }
  return 0;
}
