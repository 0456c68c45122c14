// Fetching an image named by an http:// URL (a host the configuration allows): one GET with a
// timeout and a byte limit, no redirect followed. Plain HTTP only: https needs TLS, which this
// build does not link (such a URL is refused saying so; a data: URL carries any image).
#pragma once

#include <cstdint>
#include <string>

#include "autoglm/status.h"

namespace autoglm {

struct HttpUrl {
  std::string host, port = "80", target = "/";
};

// Errors say what is wrong (the scheme, no host, a bad port).
Result<HttpUrl> parse_http_url(const std::string& url);

// The body of a 200 reply; errors name the URL and what failed (no connection, a status other
// than 200, a redirect, more than max_bytes, the timeout).
Result<std::string> http_get(const HttpUrl& url, int64_t max_bytes, double timeout_s);

}  // namespace autoglm
