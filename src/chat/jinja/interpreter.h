// Renders a parsed template against top-level variables.
#pragma once

#include <string>

#include "chat/jinja/ast.h"
#include "chat/jinja/limits.h"
#include "chat/jinja/value.h"

namespace autoglm::jinja {

// Throws Error (raise_exception, type errors, unknown filters, a limit reached...).
std::string render(const Body& body, const Object& variables, const RenderLimits& limits = {});

}  // namespace autoglm::jinja
