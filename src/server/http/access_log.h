// One line per answered request, through spdlog: when, method, path, status, tokens in and
// out, latency, which API key (an id derived from the key, never the key itself), and for a
// generation the model that answered and the route it came through. The
// target comes from the config's `access_log`: "-" (stderr, the default), a file (appended),
// or "" (off).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "autoglm/status.h"

namespace spdlog {
class logger;
}

namespace autoglm {

struct AccessEntry {
  std::string method, path, key_id, client;
  std::string model, route;  // of a generation: who answered, through which route (else empty)
  int status = 0;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::chrono::steady_clock::time_point started;
};

class AccessLog {
 public:
  // Errors name the file that cannot be opened.
  static Result<std::unique_ptr<AccessLog>> open(const std::string& target);
  ~AccessLog();

  void write(const AccessEntry& entry);
  bool enabled() const { return logger_ != nullptr; }

  // The line `write` logs, without the time stamp (exposed for tests).
  static std::string format(const AccessEntry& entry, std::chrono::steady_clock::time_point now);

 private:
  std::shared_ptr<spdlog::logger> logger_;
};

// "key-" and 8 hex digits of a hash of the key; "-" without one.
std::string api_key_id(const std::string& key);

}  // namespace autoglm
