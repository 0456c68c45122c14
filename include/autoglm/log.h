// Where the library's log lines go (warnings such as a preempted request, a tool run,
// an exception caught at the last resort).
#pragma once

#include <functional>
#include <string>

namespace autoglm {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

using LogSink = std::function<void(LogLevel, const std::string&)>;

// Replaces the process's sink (null: drop every line). Returns the previous one.
LogSink set_log_sink(LogSink sink);

const char* log_level_name(LogLevel level);

}  // namespace autoglm
