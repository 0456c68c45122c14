// JSON Schema as a grammar (GBNF text for Grammar::parse) whose sentences are the JSON
// texts that validate against the schema. Supported: type (and type lists), properties,
// required, additionalProperties, enum, const, items, minItems/maxItems, anyOf/oneOf
// (branches should not overlap), $ref into $defs/definitions (recursion allowed), string
// minLength/maxLength and formats date, time, date-time, uuid, number/integer (minimum 0,
// and integer minimum 1), boolean, null, nullable. Other constraints that change which
// texts are valid (pattern, maximum, allOf, ...) are refused with the schema path, never
// silently ignored. Properties come out in the schema's key order; absent
// additionalProperties adds no extra keys (extra keys are allowed, never required).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "autoglm/status.h"

namespace autoglm {

// `rule_prefix` goes before every rule name, the root included (`<prefix>root`), so that
// several schemas can live in one grammar.
Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema, const std::string& rule_prefix = "");

// `text` as a GBNF string literal.
std::string gbnf_literal(const std::string& text);

// Any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();

}  // namespace autoglm
