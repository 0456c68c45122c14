// Renders a parsed template against top-level variables.
#pragma once

#include <string>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/limits.h"
#include "tokenizer/jinja/value.h"

namespace autoglm::jinja {

// Throws Error (raise_exception, type errors, unknown filters, a limit reached...).
std::string render(const Body& body, const Object& variables, const RenderLimits& limits = {});

}  // namespace autoglm::jinja
