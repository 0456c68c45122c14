// The shape tokenizer.json gives normalizers, pre-tokenizers and decoders: an object with a
// "type"; a "Sequence" holds a list of such objects under its own key.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "autoglm/status.h"
#include "tokenizer/regex.h"

namespace autoglm {

// The step's "type", or an error naming `where`.
inline Result<std::string> json_step_type(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return corrupt(where + ": expected an object with a string \"type\"");
  return j["type"].get<std::string>();
}

// A Sequence: add(element, where_of_element) for each element of j[list_key].
template <typename Add>
Status add_json_sequence(const nlohmann::json& j, const std::string& where, const char* list_key, Add add) {
  if (!j.contains(list_key) || !j[list_key].is_array())
    return corrupt(where + " (Sequence): \"" + list_key + "\" must be an array");
  for (size_t i = 0; i < j[list_key].size(); ++i)
    AUTOGLM_RETURN_IF_ERROR(add(j[list_key][i], where + "." + list_key + "[" + std::to_string(i) + "]"));
  return Status::ok();
}

// The step's "pattern": {"String": literal} or {"Regex": expression}, compiled.
inline Result<std::shared_ptr<const Regex>> json_step_pattern(const nlohmann::json& j, const std::string& at) {
  const nlohmann::json pattern = j.value("pattern", nlohmann::json());
  const bool literal = pattern.contains("String");
  const nlohmann::json source = literal ? pattern["String"] : pattern.value("Regex", nlohmann::json());
  if (!source.is_string()) return corrupt(at + ": \"pattern\" must hold a \"String\" or a \"Regex\"");
  auto regex = Regex::compile(source.get<std::string>(), literal);
  if (!regex) return corrupt(at + ": " + regex.status().message());
  return std::move(regex).value();
}

}  // namespace autoglm
