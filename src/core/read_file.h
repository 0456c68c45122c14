// Whole small files (configs, templates, JSON) read into memory.
#pragma once

#include <string>

#include "autoglm/status.h"

namespace autoglm {

// The file's bytes; not_found "PATH: cannot open" when it cannot be opened.
Result<std::string> read_file(const std::string& path);

}  // namespace autoglm
