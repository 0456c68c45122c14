// Library code never writes to stderr itself: it hands lines to the log sink, which the
// embedding program sets (the CLI prints them; a Runtime passes its options' callback; by
// default they are dropped).
#pragma once

#include <functional>
#include <string>

#include "autoglm/log.h"

namespace autoglm {

// One line at `level` to the current sink (thread-safe).
void log_line(LogLevel level, const std::string& message);

}  // namespace autoglm
