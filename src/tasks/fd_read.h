// Reading a pipe or socket under a deadline and a byte cap (tool output, HTTP replies).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace autoglm {

using SteadyTime = std::chrono::steady_clock::time_point;

// Asked while a tool waits: true once its task is cancelled (the client went away). Empty: never.
using CancelCheck = std::function<bool()>;

// The error of a wait that a CancelCheck ended.
inline constexpr char kCancelledError[] = "cancelled";

// Milliseconds until `deadline` (negative once it has passed).
int64_t ms_left(SteadyTime deadline);

// Waits up to the deadline for `events` (POLLIN, POLLOUT) on `fd`; false on timeout, error or
// cancellation (asked every 20 ms while it waits).
bool wait_ready(int fd, short events, SteadyTime deadline, const CancelCheck& cancelled = {});
bool wait_readable(int fd, SteadyTime deadline, const CancelCheck& cancelled = {});

// Reads `fd` until end of file, the deadline, the byte cap or cancellation; returns the error,
// if any ("timed out after <timeout_ms> ms", "output exceeds <max_bytes> bytes", "cancelled").
std::string read_all(int fd, SteadyTime deadline, int64_t max_bytes, std::string& out, int64_t timeout_ms,
                     const CancelCheck& cancelled = {});

}  // namespace autoglm
