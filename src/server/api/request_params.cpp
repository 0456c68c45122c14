#include "server/api/request_params.h"

#include <algorithm>

#include "core/json_request.h"
#include "core/utf8.h"

namespace autoglm {

void bad(const std::string& param, const std::string& message) {
  throw ParamError{param, message};
}

int64_t parsed_json_overhead(const std::string& body) {
  constexpr int64_t kPerValue = 64;  // a json value, its place in a container, the container's own
  const size_t start = body.find_first_not_of(" \t\r\n");
  if (start == std::string::npos || (body[start] != '{' && body[start] != '[')) return 0;
  int64_t values = 1;
  bool in_string = false;
  for (size_t i = start; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == ',' || c == '[' || c == '{') {
      ++values;
    }
  }
  return values * kPerValue;
}

json parse_body(const std::string& body, const RequestLimits& limits) {
  // Linear however many keys an object has; nesting is refused as it is read, before it is built.
  auto j = parse_json_request(body, limits.json_depth, limits.json_object_keys);
  if (!j && j.status().code() == StatusCode::kOutOfRange) bad("", "the body " + j.status().message());
  if (!j) bad("", "the body is not valid JSON (or not UTF-8): " + j.status().message());
  if (!j->is_object()) bad("", "the body must be a JSON object");
  return std::move(j).value();
}

double number_param(const json& body, const char* name, double lo, double hi, double dflt) {
  if (!body.contains(name) || body[name].is_null()) return dflt;
  const json& v = body[name];
  if (!v.is_number()) bad(name, std::string("'") + name + "' must be a number");
  const double d = v.get<double>();
  if (!(d >= lo && d <= hi))
    bad(name, std::string("'") + name + "' must be between " + json(lo).dump() + " and " + json(hi).dump());
  return d;
}

int64_t integer_param(const json& body, const char* name, int64_t lo, int64_t hi, int64_t dflt) {
  if (!body.contains(name) || body[name].is_null()) return dflt;
  const json& v = body[name];
  if (!v.is_number_integer()) bad(name, std::string("'") + name + "' must be an integer");
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi)
    bad(name, std::string("'") + name + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return i;
}

bool bool_param(const json& body, const char* name, bool dflt) {
  if (!body.contains(name) || body[name].is_null()) return dflt;
  if (!body[name].is_boolean()) bad(name, std::string("'") + name + "' must be a boolean");
  return body[name].get<bool>();
}

std::string string_field(const json& obj, const char* name) {
  if (!obj.is_object() || !obj.contains(name) || !obj[name].is_string()) return "";
  return obj[name].get<std::string>();
}

std::string string_field(const json& body, const char* name, bool required) {
  if (!body.contains(name) || body[name].is_null()) {
    if (required) bad(name, std::string("'") + name + "' is required");
    return "";
  }
  if (!body[name].is_string() || (required && body[name].get<std::string>().empty()))
    bad(name, std::string("'") + name + "' must be a non-empty string");
  return body[name];
}

std::string check_utf8(const std::string& s, const std::string& param) {
  if (utf8::sanitize(s) != s) bad(param, "'" + param + "' is not valid UTF-8");
  return s;
}

}  // namespace autoglm
