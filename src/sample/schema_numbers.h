// JSON Schema's numeric keywords as regular expressions (sample/regex.h) and automata.
//
// What is exact: for `integer`, every bound (minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, any finite value) gives exactly the integers in range, written
// canonically (no leading zeros, no "-0", no exponent, at most 16 digits). For `number`,
// bounds must be whole numbers; the grammar then accepts exactly the decimals in range
// written without an exponent, with at most 16 integer digits (and at most 15 fraction
// digits, 29 after a bound excluded by its own integer part). `multipleOf` is exact for
// integers (a remainder automaton; refused once it grows past the automaton limits).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sample/automaton.h"

namespace autoglm {

struct NumberBounds {
  std::optional<double> minimum, maximum;  // the tighter of minimum/exclusiveMinimum etc.
  bool exclusive_minimum = false, exclusive_maximum = false;
  bool bounded() const { return minimum || maximum; }
};

// An anchored regex for the numbers (or integers) within `bounds`; errors name the keyword.
Result<std::string> number_regex(const NumberBounds& bounds, bool integer);

// The canonical decimal integers divisible by `divisor` (> 0).
Dfa multiple_of_dfa(int64_t divisor);

// Digits of the canonical integers in [lo, hi], 0 <= lo <= hi (exposed for tests).
std::string integer_range_regex(uint64_t lo, uint64_t hi);

}  // namespace autoglm
