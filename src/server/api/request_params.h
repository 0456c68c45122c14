// Reading request bodies: each helper checks one field's type and range and throws
// ParamError (a 400 naming the field) when it is wrong. ApiService::handle turns the throw
// into the reply, so a route reads like the list of its fields.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include <string>
#include "autoglm/limits.h"

namespace autoglm {

using json = nlohmann::ordered_json;

struct ParamError {
  std::string param, message;
};

[[noreturn]] void bad(const std::string& param, const std::string& message);

// The body as a JSON object; past the json_depth and json_object_keys limits it is a 400.
json parse_body(const std::string& body, const RequestLimits& limits);
// About the memory a JSON body takes once parsed, beyond its own bytes: every value, however
// small ("[]," is 3 bytes), is a node of tens of bytes. 0 for a body that is no JSON object.
int64_t parsed_json_overhead(const std::string& body);

double number_param(const json& body, const char* name, double lo, double hi, double dflt);
int64_t integer_param(const json& body, const char* name, int64_t lo, int64_t hi, int64_t dflt);
bool bool_param(const json& body, const char* name, bool dflt);
// obj[name] when it is a string, else "" (json::value would throw on another type: a 500).
std::string string_field(const json& obj, const char* name);
// body[name]: a 400 naming it when absent (and `required`), or not a non-empty string; "" when
// absent and not required.
std::string string_field(const json& body, const char* name, bool required);
// The text itself, when it is valid UTF-8.
std::string check_utf8(const std::string& s, const std::string& param);

}  // namespace autoglm
