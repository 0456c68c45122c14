// What the HTTP transport asks of the service behind it (ApiService): admission from the
// headers, the handler once the body is in, and the service's part of a drain and a stop. The
// transport knows nothing else of it, so it sits below the service in the layer order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/api/reply.h"
#include "server/config/config.h"
#include "server/metrics/metrics.h"

namespace autoglm {

class HttpService {
 public:
  virtual ~HttpService() = default;

  // The checks that need no body; a refusal is answered before any body is read.
  virtual std::optional<Reply> admit(const HttpRequest& head) = 0;
  // A request that passed admit, its body in.
  virtual Reply handle_admitted(const HttpRequest& request) = 0;
  // The most body bytes this request may send.
  virtual int64_t body_limit(const HttpRequest& head) const = 0;
  // The CORS headers of every response to a request from `origin` (none when not allowed).
  virtual std::vector<std::pair<std::string, std::string>> cors_headers(const std::string& origin) const = 0;
  virtual bool accepts_key(const std::string& key) const = 0;
  virtual const ServerConfig& config() const = 0;
  virtual ServerMetrics& metrics() = 0;

  // Drain: new requests get 503 while those in flight (in_flight) go on; then the rest are
  // cancelled, and at the stop the service waits for its tasks and stops its engines.
  virtual void begin_drain() = 0;
  virtual int64_t in_flight() = 0;
  virtual void cancel_in_flight() = 0;
  virtual void begin_stop() = 0;
  virtual void shutdown() = 0;
};

}  // namespace autoglm
