#include "core/random_id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace autoglm {
namespace {

void fill_random(uint8_t* bytes, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = getrandom(bytes + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {  // no CSPRNG: handing out guessable ids would be worse than stopping
      std::perror("getrandom");
      std::abort();
    }
    got += size_t(r);
  }
}

}  // namespace

std::string random_id(std::string_view prefix) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  uint8_t bytes[16];
  fill_random(bytes, sizeof(bytes));
  std::string id(prefix);
  uint32_t bits = 0;
  int n_bits = 0;
  for (uint8_t b : bytes) {
    bits = (bits << 8) | b;
    n_bits += 8;
    while (n_bits >= 6) {
      n_bits -= 6;
      id += kAlphabet[(bits >> n_bits) & 63];
    }
  }
  if (n_bits > 0) id += kAlphabet[(bits << (6 - n_bits)) & 63];
  return id;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace autoglm
