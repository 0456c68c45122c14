// JSON Schema string formats as anchored regular expressions (sample/regex.h), checked
// against ajv-formats' "full" mode. Exact: date (month lengths and leap years), ipv4,
// uuid (with the optional urn:uuid: prefix), email (ajv's rule: dot-atom local part, a
// domain of one or more dots). Subsets of ajv's language, so every generated value
// validates: time and date-time (seconds required, a time zone required, no leap second,
// 'T' as the separator), duration (whole numbers), hostname (labels of 1-63 characters,
// total length not bounded), ipv6 (no embedded IPv4 and no zone), uri (RFC 3986 without
// IP-literal hosts).
#pragma once

#include <string>

namespace autoglm {

// nullptr for a format this module does not know.
const char* format_regex(const std::string& format);

}  // namespace autoglm
