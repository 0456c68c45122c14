// Reading a pipe or socket under a deadline and a byte cap (tool output, HTTP replies).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace autoglm {

using SteadyTime = std::chrono::steady_clock::time_point;

// Milliseconds until `deadline` (negative once it has passed).
int64_t ms_left(SteadyTime deadline);

// Waits up to the deadline for `fd` to become readable; false on timeout or error.
bool wait_readable(int fd, SteadyTime deadline);

// Reads `fd` until end of file, the deadline or the byte cap; returns the error, if any
// ("timed out after <timeout_ms> ms", "output exceeds <max_bytes> bytes").
std::string read_all(int fd, SteadyTime deadline, int64_t max_bytes, std::string& out, int64_t timeout_ms);

}  // namespace autoglm
