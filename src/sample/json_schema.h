// JSON Schema as a grammar (GBNF text for Grammar::parse) whose sentences are the JSON
// texts that validate against the schema. Supported: type (and type lists), properties,
// required, additionalProperties, minProperties/maxProperties, enum, const, items,
// prefixItems, minItems/maxItems, anyOf/oneOf (branches should not overlap), allOf (merged
// into one schema), $ref into $defs/definitions (recursion allowed), nullable; strings with
// minLength/maxLength, pattern (sample/regex.h) and format (sample/schema_formats.h),
// intersected as automata; number/integer with minimum/maximum/exclusive bounds and integer
// multipleOf (sample/schema_numbers.h says what is exact). Annotations (title, description,
// default, examples, $schema, ...) are ignored; keywords that change which values are valid
// and are not enforced (not, uniqueItems, contains, if, patternProperties, ...) are refused
// with the schema path, never silently ignored. Properties come out required first, each
// group in key order; absent additionalProperties adds no extra keys (extra keys are allowed, never
// required).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "autoglm/status.h"
#include "sample/gbnf_literal.h"  // gbnf_literal: with the schemas' grammars, what callers quote

namespace autoglm {

// `rule_prefix` goes before every rule name, the root included (`<prefix>root`), so that
// several schemas can live in one grammar.
Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema, const std::string& rule_prefix = "");

// Any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();

}  // namespace autoglm
