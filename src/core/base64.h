// Base64 (RFC 4648, the standard alphabet with '=' padding): embeddings' base64 encoding, data
// URLs' payloads.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace autoglm {

std::string base64_encode(const void* data, size_t n);
// The bytes of `text`; none when it is not base64 (a character outside the alphabet, padding
// anywhere but the end, a length that no encoding has). ASCII whitespace is skipped, as MIME
// allows; at most `max_bytes` decoded bytes (more: none).
std::optional<std::string> base64_decode(std::string_view text, size_t max_bytes = SIZE_MAX);

}  // namespace autoglm
