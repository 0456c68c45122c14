// Python dicts to the public option structs: every key is known or the error names it.
#pragma once

#include <pybind11/pybind11.h>

#include "autoglm/runtime.h"
#include "autoglm/server.h"

namespace autoglm::python {

// Raises the Python exception for a status (openautoglm.errors): ValueError for bad arguments,
// FileNotFoundError, ModelFormatError (corrupt or unsupported files), OpenAutoGLMError otherwise.
[[noreturn]] void raise(const Status& status);

RuntimeOptions runtime_options(const pybind11::dict& options);
Request request_from(const pybind11::dict& request);

}  // namespace autoglm::python
