#include "server/api/multipart.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace autoglm {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

// The value of `param` in a header value such as `form-data; name="file"; filename="a.jsonl"`
// (quoted or not); nullopt when absent.
std::optional<std::string> header_param(const std::string& value, const std::string& param) {
  size_t at = value.find(';');
  while (at != std::string::npos) {
    const size_t eq = value.find('=', at);
    if (eq == std::string::npos) return std::nullopt;
    const std::string key = lower(trim(value.substr(at + 1, eq - at - 1)));
    size_t start = eq + 1;
    std::string v;
    size_t next;
    if (start < value.size() && value[start] == '"') {
      std::string out;
      size_t i = start + 1;
      for (; i < value.size() && value[i] != '"'; ++i) {
        if (value[i] == '\\' && i + 1 < value.size()) ++i;
        out += value[i];
      }
      v = out;
      next = value.find(';', i);
    } else {
      next = value.find(';', start);
      v = trim(value.substr(start, next == std::string::npos ? std::string::npos : next - start));
    }
    if (key == param) return v;
    at = next;
  }
  return std::nullopt;
}

Result<FormPart> parse_part(const std::string& raw, size_t index) {
  const std::string where = "multipart body: part " + std::to_string(index + 1);
  const size_t end_of_headers = raw.find("\r\n\r\n");
  if (end_of_headers == std::string::npos) return invalid_argument(where + " has no blank line after its headers");
  FormPart part;
  bool disposition = false;
  for (size_t at = 0; at < end_of_headers;) {
    size_t eol = raw.find("\r\n", at);
    if (eol == std::string::npos || eol > end_of_headers) eol = end_of_headers;
    const std::string line = raw.substr(at, eol - at);
    at = eol + 2;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) return invalid_argument(where + ": a header line without ':'");
    const std::string name = lower(trim(line.substr(0, colon))), value = trim(line.substr(colon + 1));
    if (name == "content-type") part.content_type = value;
    if (name != "content-disposition") continue;
    if (lower(value.substr(0, 9)) != "form-data")
      return invalid_argument(where + ": Content-Disposition is not form-data");
    auto field = header_param(value, "name");
    if (!field || field->empty()) return invalid_argument(where + ": Content-Disposition has no name");
    part.name = *field;
    part.filename = header_param(value, "filename").value_or("");
    disposition = true;
  }
  if (!disposition) return invalid_argument(where + " has no Content-Disposition header");
  part.data = raw.substr(end_of_headers + 4);
  return part;
}

}  // namespace

Result<std::vector<FormPart>> parse_multipart(const std::string& content_type, const std::string& body) {
  if (lower(content_type).rfind("multipart/form-data", 0) != 0)
    return invalid_argument("Content-Type must be multipart/form-data (got '" + content_type + "')");
  const auto boundary = header_param(content_type, "boundary");
  if (!boundary || boundary->empty() || boundary->size() > 200)
    return invalid_argument("Content-Type multipart/form-data has no usable boundary");
  const std::string delimiter = "--" + *boundary;
  size_t at = body.find(delimiter);
  if (at == std::string::npos) return invalid_argument("multipart body: no boundary line");
  std::vector<FormPart> parts;
  for (;;) {
    at += delimiter.size();
    if (body.compare(at, 2, "--") == 0) return parts;  // the closing boundary
    if (body.compare(at, 2, "\r\n") != 0)
      return invalid_argument("multipart body: a boundary line is not followed by a line break");
    at += 2;
    const size_t next = body.find("\r\n" + delimiter, at);
    if (next == std::string::npos) return invalid_argument("multipart body: it does not end with the closing boundary");
    AUTOGLM_ASSIGN_OR_RETURN(FormPart part, parse_part(body.substr(at, next - at), parts.size()));
    parts.push_back(std::move(part));
    at = next + 2;
  }
}

const FormPart* form_field(const std::vector<FormPart>& parts, const std::string& name) {
  auto it = std::find_if(parts.begin(), parts.end(), [&](const FormPart& p) { return p.name == name; });
  return it == parts.end() ? nullptr : &*it;
}

}  // namespace autoglm
