// Parses a Jinja template (with trim_blocks and lstrip_blocks, as Hugging Face
// renders chat templates) into a syntax tree.
#pragma once

#include <string>

#include "chat/jinja/ast.h"

namespace autoglm::jinja {

// Throws Error with the line of the problem.
Body parse_template(const std::string& source);

}  // namespace autoglm::jinja
