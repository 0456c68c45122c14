// The last line of defence of a long-lived thread: an exception that escapes its work is
// logged and reported, never left to std::terminate (which would end every connection).
#pragma once

#include <exception>
#include <string>

namespace autoglm {

// What an escaped exception says: its what() for a std::exception, else a fixed text.
std::string describe_exception(const std::exception_ptr& e);

void log_escaped_exception(const char* where, const std::string& what);

// Runs `work`; if it throws, logs "<where>: <what>", calls `on_error(what)` and
// returns false. An exception from `on_error` itself is logged and dropped.
template <class Work, class OnError>
bool run_guarded(const char* where, Work&& work, OnError&& on_error) {
  std::string what;
  try {
    work();
    return true;
  } catch (...) {
    what = describe_exception(std::current_exception());
  }
  log_escaped_exception(where, what);
  try {
    on_error(what);
  } catch (...) {
    log_escaped_exception(where, "while reporting the error: " + describe_exception(std::current_exception()));
  }
  return false;
}

}  // namespace autoglm
