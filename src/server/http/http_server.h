// HTTP/1.1 transport on Boost.Beast/Asio: a few I/O threads serve every
// connection (no thread per connection); generation replies are fed by the
// engine's stream handles without blocking an I/O thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "autoglm/status.h"
#include "server/http/http_service.h"

namespace autoglm {

class HttpServer {
 public:
  HttpServer(HttpService& api, int io_threads);
  ~HttpServer();

  // Binds and starts serving; port 0 picks a free port (see port()).
  Status start(const std::string& host, int port);
  int port() const { return port_; }
  // Requests read whole and being prepared on a worker (parsed, templated, tokenized), for
  // tests that order events by it.
  int64_t requests_preparing() const;
  // Bytes of request bodies read and held (being read, or waiting for their preparation).
  int64_t body_bytes_in_flight() const;
  // Stops accepting and waits for the I/O threads; the connections stay open (their sessions
  // held by the stopped context) until close_connections() or the destructor.
  void stop();
  // Shuts the service down (its engines: a sequence they finish releases a callback that holds
  // one of this context's strands), then destroys the stopped context and with it every
  // session still held: open connections close. The destructor does the same.
  void close_connections();
  // Graceful shutdown: new requests get 503 while those in flight finish, for up to
  // `grace_seconds`; the rest are cancelled (their streams end with finish_reason
  // "cancelled" and [DONE]) and given a moment to flush; then stop().
  void drain_and_stop(double grace_seconds);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  HttpService& api_;
  int io_threads_;
  int port_ = 0;
};

}  // namespace autoglm
