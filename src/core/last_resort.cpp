#include "core/last_resort.h"

#include <new>

#include "core/log.h"

namespace autoglm {

std::string describe_exception(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    return "out of memory";
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "an exception of an unknown type";
  }
}

void log_escaped_exception(const char* where, const std::string& what) {
  log_line(LogLevel::kError, std::string(where) + ": caught an escaped exception: " + what +
                                 " (the affected request failed; serving goes on)");
}

}  // namespace autoglm
