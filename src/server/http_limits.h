// How much of a request the HTTP server reads before it refuses it: shared by the server's
// sessions and the HTTP fuzz target, so the fuzzer parses exactly as the server does.
#pragma once

#include <atomic>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace autoglm {

// The request line and headers together.
constexpr uint32_t kMaxHeaderBytes = 16 * 1024;
// Bytes read but not yet parsed: a header block, a chunk header with its extensions, or the
// trailer of a chunked body (which Beast does not count against the header limit). Below
// Beast's 64 KiB field size, so no field can make it throw. The read buffer's max size.
constexpr size_t kMaxUnparsedBytes = 32 * 1024;

template <class Parser>
void apply_request_limits(Parser& parser, int64_t max_body_bytes) {
  parser.body_limit(uint64_t(max_body_bytes));
  parser.header_limit(kMaxHeaderBytes);
}

// Bytes of request bodies held at once across all connections: reserved when a request's
// headers announce its body, given back when the reservation is destroyed (the body is no
// longer needed). 200 clients each starting an 8 MB body must not add 1.6 GB.
class BodyBudget {
 public:
  // nullptr when `bytes` more would pass `cap`.
  static std::shared_ptr<BodyBudget> reserve(std::atomic<int64_t>& in_flight, int64_t bytes, int64_t cap) {
    const int64_t after = in_flight.fetch_add(bytes) + bytes;
    if (bytes > 0 && after > cap) {
      in_flight.fetch_sub(bytes);
      return nullptr;
    }
    return std::shared_ptr<BodyBudget>(new BodyBudget(in_flight, bytes));
  }
  ~BodyBudget() { in_flight_.fetch_sub(bytes_); }
  BodyBudget(const BodyBudget&) = delete;
  BodyBudget& operator=(const BodyBudget&) = delete;

 private:
  BodyBudget(std::atomic<int64_t>& in_flight, int64_t bytes) : in_flight_(in_flight), bytes_(bytes) {}
  std::atomic<int64_t>& in_flight_;
  int64_t bytes_;
};

}  // namespace autoglm
