// GBNF string literals, shared by the grammars built from JSON Schema (json_schema.h) and from
// automata (automaton_gbnf.h).
#pragma once

#include <string>

namespace autoglm {

// `text` as a GBNF string literal.
std::string gbnf_literal(const std::string& text);

}  // namespace autoglm
