// Untrusted JSON text (request bodies, messages_json...) as an ordered_json, in one linear
// pass: nlohmann's ordered_json looks every key up in a list, so an object with n keys takes
// n^2 steps to parse (a 1.6 MB body of keys: about a minute). Here each object keeps a hash
// of its keys while it is read. Nesting past max_depth is refused before it is built.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "autoglm/status.h"

namespace autoglm {

// A lone UTF-16 surrogate escape becomes U+FFFD. Duplicate keys: the last value wins (as nlohmann, Python and
// JavaScript do). Errors say where the text is wrong, that it "nests ... deeper than" max_depth ("limit json_depth"),
// or that it "has an object with more than" max_object_keys keys ("limit json_object_keys"; these two are
// kOutOfRange, bad JSON kInvalidArgument), read after the name of what was parsed ("the body ..."). The parser keeps
// its own stack: no recursion.
Result<nlohmann::ordered_json> parse_json_request(std::string_view text, int max_depth,
                                                  int64_t max_object_keys = int64_t(1) << 40);

}  // namespace autoglm
