// JSON documents (config.json, tokenizer.json, index files): parse errors name the file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "autoglm/status.h"

namespace autoglm {

// corrupt "WHERE: not valid JSON: ..." when the text does not parse.
Result<nlohmann::json> parse_json(const std::string& text, const std::string& where);
Result<nlohmann::json> read_json_file(const std::string& path);

}  // namespace autoglm
