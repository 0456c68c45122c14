// ECMAScript regular expressions, the subset JSON Schema's `pattern` and zod use, as a
// DFA over code points. Supported: literals, `.`, classes `[...]` `[^...]` with ranges,
// escapes \d \D \w \W \s \S \t \n \r \f \v \0 \xHH \uHHHH \u{H...} and escaped syntax
// characters, groups `( )` `(?: )` `(?<name> )`, alternation, quantifiers * + ? {m}
// {m,} {m,n} (lazy forms match the same strings), `^` and `$` at the ends of a top-level
// branch, and lookaheads `(?= )` `(?! )` right after a leading `^`. A branch without `^`
// or `$` matches anywhere in the string, as `pattern` does. Refused, with the position:
// backreferences, lookbehind, lookaheads elsewhere, word boundaries, Unicode property
// escapes, anchors inside groups.
#pragma once

#include <string>

#include "sample/automaton.h"

namespace autoglm {

// Spends from `budget` (shared by a schema's automata); past any of its limits, an error.
Result<Dfa> compile_regex(const std::string& pattern, AutomatonBudget& budget);
// With a budget of its own.
Result<Dfa> compile_regex(const std::string& pattern, const AutomatonLimits& limits = {});

}  // namespace autoglm
