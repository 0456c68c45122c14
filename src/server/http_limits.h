// How much of a request the HTTP server reads before it refuses it: shared by the server's
// sessions and the HTTP fuzz target, so the fuzzer parses exactly as the server does.
#pragma once

#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>

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

}  // namespace autoglm
