// Untrusted JSON text (request bodies, messages_json...) as an ordered_json, in one linear
// pass: nlohmann's ordered_json looks every key up in a list, so an object with n keys takes
// n^2 steps to parse (a 1.6 MB body of keys: about a minute). Here each object keeps a hash
// of its keys while it is read. Nesting past max_depth is refused before it is built.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "autoglm/status.h"

namespace autoglm {

// Duplicate keys: the last value wins (as nlohmann, Python and JavaScript do). Errors say
// where the text is wrong, or that it nests deeper than max_depth ("limit json_depth").
Result<nlohmann::ordered_json> parse_json_request(std::string_view text, int max_depth);

}  // namespace autoglm
