#include "core/byte_size.h"

#include <cstdio>

namespace autoglm {

std::string format_bytes(double bytes) {
  constexpr double kMiB = 1024.0 * 1024.0, kGiB = 1024.0 * kMiB;
  char text[48];
  if (bytes < kGiB)
    std::snprintf(text, sizeof(text), "%.0f MiB", bytes / kMiB);
  else
    std::snprintf(text, sizeof(text), "%.2f GiB", bytes / kGiB);
  return text;
}

}  // namespace autoglm
