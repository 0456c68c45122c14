// A DFA written as right-linear grammar rules: one rule per state, `state ::= class next |
// ... | ""`. In kJsonString form the rules match the text as the inside of a JSON string
// (`"` and `\` escaped, control characters as escapes), so a schema's `pattern` or
// `format` constrains the string's value, not its encoding.
#pragma once

#include <map>
#include <string>

#include "sample/automaton.h"

namespace autoglm {

enum class TextForm { kRaw, kJsonString };

// Adds the rules (`<name>-<state>`) to `rules`; returns the start rule's name. The DFA must
// accept something (trimmed and not empty).
std::string add_dfa_rules(const Dfa& dfa, const std::string& name, TextForm form,
                          std::map<std::string, std::string>& rules);

}  // namespace autoglm
