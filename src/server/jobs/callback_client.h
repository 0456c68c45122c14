// Delivering a job's callback: an http:// URL checked against an allowlist of hosts, one POST
// with a timeout, no redirect followed (a 3xx is a failed attempt). Plain HTTP only: the
// receivers are meant to be on the same host or network (the default allowlist is loopback).
#pragma once

#include <string>
#include <vector>

#include "autoglm/status.h"

namespace autoglm {

struct CallbackUrl {
  std::string host, port = "80", target = "/";
};

// Errors say what is wrong with the URL (scheme, host not allowed, ...). `allowlist`: host
// names or addresses; empty: loopback only (127.0.0.1, ::1, localhost).
Result<CallbackUrl> parse_callback_url(const std::string& url, const std::vector<std::string>& allowlist);

struct CallbackOutcome {
  int http_status = 0;  // 0: no response
  std::string error;    // "" when a 2xx came back
  bool delivered() const { return error.empty(); }
};

CallbackOutcome post_callback(const CallbackUrl& url, const std::string& body,
                              const std::vector<std::pair<std::string, std::string>>& headers, double timeout_s);

}  // namespace autoglm
