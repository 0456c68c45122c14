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

bool wait_readable(int fd, SteadyTime deadline) {
  for (;;) {
    const int64_t left = ms_left(deadline);
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, int(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno != EINTR) return false;
    if (r > 0) return true;
  }
}

std::string read_all(int fd, SteadyTime deadline, int64_t max_bytes, std::string& out, int64_t timeout_ms) {
  char buf[4096];
  for (;;) {
    if (!wait_readable(fd, deadline)) {
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
