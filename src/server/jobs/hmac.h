// HMAC-SHA256 (OpenSSL's libcrypto), as lower-case hex: the signature of callback bodies.
#pragma once

#include <string>

namespace autoglm {

std::string hmac_sha256_hex(const std::string& key, const std::string& message);

}  // namespace autoglm
