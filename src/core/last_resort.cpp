#include "core/last_resort.h"

#include <cstdio>
#include <new>

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
  std::fprintf(stderr, "%s: caught an escaped exception: %s (the affected request failed; serving goes on)\n", where,
               what.c_str());
}

}  // namespace autoglm
