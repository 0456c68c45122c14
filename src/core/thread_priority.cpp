#include "core/thread_priority.h"

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace autoglm {

namespace {
constexpr int kBackgroundNice = 10;  // CFS weight 110 against 1024 for the engine's nice 0
}  // namespace

void use_background_priority() {
#if defined(__linux__)
  thread_local bool lowered = false;
  if (lowered) return;
  lowered = true;
  // On Linux a thread is a task of its own: PRIO_PROCESS with its tid sets this thread only.
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  const int now = getpriority(PRIO_PROCESS, tid);
  if (now < kBackgroundNice) setpriority(PRIO_PROCESS, tid, kBackgroundNice);
#endif
}

}  // namespace autoglm
