// The calculator builtin: + - * / % ^, unary minus, parentheses, decimal numbers.
#pragma once

#include <string>

#include "autoglm/status.h"

namespace autoglm {

// Errors say what and where (division by zero, unexpected character at offset N).
Result<double> evaluate_arithmetic(const std::string& expression);

}  // namespace autoglm
