#include "core/log.h"

#include <mutex>

namespace autoglm {
namespace {

std::mutex& sink_mutex() {
  static std::mutex m;
  return m;
}

LogSink& current_sink() {
  static LogSink sink;
  return sink;
}

}  // namespace

LogSink set_log_sink(LogSink sink) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  std::swap(current_sink(), sink);
  return sink;
}

void log_line(LogLevel level, const std::string& message) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  if (current_sink()) current_sink()(level, message);
}

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "";
}

}  // namespace autoglm
