#include "tasks/fd_read.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace autoglm {

int64_t ms_left(SteadyTime deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
}

bool wait_ready(int fd, short events, SteadyTime deadline, const CancelCheck& cancelled) {
  // A cancelled task learns of it only by asking: short slices keep a dead client's tool brief.
  const int64_t slice = cancelled ? 20 : 1000;
  for (;;) {
    const int64_t left = ms_left(deadline);
    if (left <= 0 || (cancelled && cancelled())) return false;
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, int(std::min<int64_t>(left, slice)));
    if (r < 0 && errno != EINTR) return false;
    if (r > 0) return true;
  }
}

bool wait_readable(int fd, SteadyTime deadline, const CancelCheck& cancelled) {
  return wait_ready(fd, POLLIN, deadline, cancelled);
}

std::string read_all(int fd, SteadyTime deadline, int64_t max_bytes, std::string& out, int64_t timeout_ms,
                     const CancelCheck& cancelled) {
  char buf[4096];
  for (;;) {
    if (!wait_readable(fd, deadline, cancelled)) {
      if (cancelled && cancelled()) return kCancelledError;
      if (ms_left(deadline) > 0) return std::string("poll: ") + std::strerror(errno);
      return "timed out after " + std::to_string(timeout_ms) + " ms";
    }
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return "";
    if (int64_t(out.size()) + n > max_bytes) {
      out.append(buf, size_t(max_bytes - int64_t(out.size())));
      return "output exceeds " + std::to_string(max_bytes) + " bytes";
    }
    out.append(buf, size_t(n));
  }
}

}  // namespace autoglm
