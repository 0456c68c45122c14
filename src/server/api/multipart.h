// multipart/form-data bodies (RFC 7578), as clients upload files: the parts with their field
// name, file name and bytes. Errors say what in the body was wrong.
#pragma once

#include <string>
#include <vector>

#include "autoglm/status.h"

namespace autoglm {

struct FormPart {
  std::string name;          // the form field (Content-Disposition name=)
  std::string filename;      // "" unless the part is a file
  std::string content_type;  // the part's own, "" when absent
  std::string data;
};

// `content_type`: the request's Content-Type header, which carries the boundary.
Result<std::vector<FormPart>> parse_multipart(const std::string& content_type, const std::string& body);

// The first part named `name`, or nullptr.
const FormPart* form_field(const std::vector<FormPart>& parts, const std::string& name);

}  // namespace autoglm
