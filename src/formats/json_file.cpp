#include "formats/json_file.h"

#include "core/read_file.h"

namespace autoglm {

Result<nlohmann::json> parse_json(const std::string& text, const std::string& where) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return corrupt(where + ": not valid JSON: " + e.what());
  }
}

Result<nlohmann::json> read_json_file(const std::string& path) {
  AUTOGLM_ASSIGN_OR_RETURN(const std::string text, read_file(path));
  return parse_json(text, path);
}

}  // namespace autoglm
