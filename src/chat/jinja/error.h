// The one exception of the template engine (values, limits, parser, interpreter).
#pragma once

#include <stdexcept>

namespace autoglm::jinja {

// Thrown inside the interpreter; ChatTemplate turns it into a Status.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace autoglm::jinja
