#include "tasks/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>

#include "tasks/fd_read.h"

namespace autoglm {
namespace {

// Everything from here to run_confined runs in a child forked from a multi-threaded process:
// only async-signal-safe calls (no allocation, no locks, no stdio).

constexpr int kExitCannotRun = 127;
constexpr int kExitCannotEnterCwd = 126;

void close_from(int first_fd) {
  if (close_range(unsigned(first_fd), ~0U, 0) == 0) return;
  rlimit lim{};  // kernels before 5.9: one by one
  const int max_fd = getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY ? int(lim.rlim_cur) : 65536;
  for (int fd = first_fd; fd < max_fd; ++fd) close(fd);
}

[[noreturn]] void exec_command(char* const* argv, char* const* envp, const char* cwd, int out_fd) {
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGPIPE, SIGCHLD, SIGTERM, SIGINT}) signal(sig, SIG_DFL);
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, 0);
  dup2(out_fd, 1);
  dup2(out_fd, 2);
  close_from(3);
  if (cwd[0] != '\0' && chdir(cwd) != 0) _exit(kExitCannotEnterCwd);
  execve(argv[0], argv, envp);
  _exit(kExitCannotRun);
}

void close_all_but(int keep_a, int keep_b) {
  const int low = keep_a < keep_b ? keep_a : keep_b, high = keep_a < keep_b ? keep_b : keep_a;
  for (int fd = 0; fd < low; ++fd) close(fd);
  for (int fd = low + 1; fd < high; ++fd) close(fd);
  close_from(high + 1);
}

void note_signal(int) {}

// Parses the pids in /proc/self/task/<tid>/children into `pids`; returns how many.
int read_children(pid_t self, pid_t* pids, int max_pids) {
  char path[64] = "/proc/self/task/";
  char digits[16];
  int n = 0;
  for (unsigned v = unsigned(self); v > 0; v /= 10) digits[n++] = char('0' + v % 10);
  size_t at = std::strlen(path);
  while (n > 0) path[at++] = digits[--n];
  const char tail[] = "/children";
  std::memcpy(path + at, tail, sizeof(tail));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[4096];
  const ssize_t len = read(fd, buf, sizeof(buf));
  close(fd);
  int count = 0;
  long value = -1;
  for (ssize_t i = 0; i < len && count < max_pids; ++i) {
    if (buf[i] >= '0' && buf[i] <= '9') {
      value = (value < 0 ? 0 : value * 10) + (buf[i] - '0');
    } else if (value >= 0) {
      pids[count++] = pid_t(value);
      value = -1;
    }
  }
  if (value >= 0 && count < max_pids) pids[count++] = pid_t(value);
  return count;
}

// Kills every process left under this supervisor until none is: each one killed hands its
// own children to the supervisor (the subreaper), which kills them in turn.
void kill_everything_below(pid_t self, pid_t command_pid) {
  pid_t pids[256];
  for (;;) {
    const int n = read_children(self, pids, 256);
    if (n < 0) {  // no /proc children list: the command's process group is the best we can do
      kill(-command_pid, SIGKILL);
      kill(command_pid, SIGKILL);
    }
    for (int i = 0; i < n; ++i) kill(pids[i], SIGKILL);
    int status = 0;
    if (waitpid(-1, &status, 0) < 0 && errno == ECHILD) return;
  }
}

// The supervisor: starts the command, reports its wait status on `status_fd` when it exits,
// and on SIGTERM (from the server, or as its parent-death signal) kills all that remains.
[[noreturn]] void supervise(char* const* argv, char* const* envp, const char* cwd, int out_fd, int status_fd,
                            pid_t server_pid) {
  setpgid(0, 0);
  close_all_but(out_fd, status_fd);  // the supervisor holds no socket of the server either
  sigset_t watched;
  sigemptyset(&watched);
  sigaddset(&watched, SIGTERM);
  sigaddset(&watched, SIGCHLD);
  sigprocmask(SIG_BLOCK, &watched, nullptr);  // taken with sigwaitinfo: no race with a handler
  struct sigaction on_child {};
  on_child.sa_handler = note_signal;  // a handled SIGCHLD stays pending, never discarded
  sigaction(SIGCHLD, &on_child, nullptr);
  // A status written after the server stopped reading must not kill the supervisor (SIGPIPE's
  // default): what the command left running would go to init, alive.
  signal(SIGPIPE, SIG_IGN);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t self = getpid();
  if (getppid() != server_pid) _exit(1);  // the server's thread went away before the prctl
  const pid_t command_pid = fork();
  if (command_pid == 0) exec_command(argv, envp, cwd, out_fd);
  close(out_fd);  // only the command and what it starts hold the output pipe
  if (command_pid < 0) {
    const int status = W_EXITCODE(kExitCannotRun, 0);
    ssize_t ignored = write(status_fd, &status, sizeof(status));
    (void)ignored;
    _exit(0);
  }
  bool command_running = true;
  for (;;) {
    siginfo_t info;
    const int sig = sigwaitinfo(&watched, &info);
    if (sig == SIGTERM) break;
    if (sig != SIGCHLD) continue;
    int status = 0;
    for (pid_t p; (p = waitpid(-1, &status, WNOHANG)) != 0;) {
      if (p < 0) _exit(0);  // ECHILD: the command and everything it started are gone
      if (p == command_pid && command_running) {
        command_running = false;
        ssize_t ignored = write(status_fd, &status, sizeof(status));
        (void)ignored;
      }
    }
  }
  kill_everything_below(self, command_pid);
  _exit(0);
}

struct CStrings {
  std::vector<std::string> owned;
  std::vector<char*> pointers;
  explicit CStrings(std::vector<std::string> strings) : owned(std::move(strings)) {
    for (auto& s : owned) pointers.push_back(s.data());
    pointers.push_back(nullptr);
  }
};

void close_both(int fds[2]) {
  close(fds[0]);
  close(fds[1]);
}

// Why a command that ran to its end failed, or "" when it succeeded.
std::string exit_error(int status, const CommandSpec& spec) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == kExitCannotRun) return "could not run " + spec.argv[0];
  if (WIFEXITED(status) && WEXITSTATUS(status) == kExitCannotEnterCwd) return "could not enter " + spec.cwd;
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "";
}

// The command's wait status from the supervisor, once the output has ended.
std::optional<int> read_wait_status(int fd, SteadyTime deadline, const CancelCheck& cancelled) {
  int status = 0;
  if (!wait_readable(fd, deadline, cancelled)) return std::nullopt;
  if (read(fd, &status, sizeof(status)) != ssize_t(sizeof(status))) return std::nullopt;
  return status;
}

// The supervisors of the commands running now (a process-wide fact: they are our children).
std::mutex& running_mutex() {
  static std::mutex m;
  return m;
}

std::set<pid_t>& running_supervisors() {
  static std::set<pid_t> pids;
  return pids;
}

}  // namespace

void terminate_running_commands() {
  std::lock_guard<std::mutex> lock(running_mutex());
  for (pid_t pid : running_supervisors()) kill(pid, SIGTERM);
}

CommandResult run_confined(const CommandSpec& spec) {
  CommandResult r;
  CStrings argv(spec.argv), env(spec.env);
  int out[2], status_pipe[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    r.error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    r.error = std::string("pipe: ") + std::strerror(errno);
    close_both(out);
    return r;
  }
  const pid_t server_pid = getpid();
  const pid_t supervisor = fork();
  if (supervisor == 0) {
    close(out[0]);
    close(status_pipe[0]);
    // The pipes are O_CLOEXEC: the command's dup2 copies survive exec, the originals do not.
    supervise(argv.pointers.data(), env.pointers.data(), spec.cwd.c_str(), out[1], status_pipe[1], server_pid);
  }
  close(out[1]);
  close(status_pipe[1]);
  if (supervisor < 0) {
    r.error = std::string("fork: ") + std::strerror(errno);
    close(out[0]);
    close(status_pipe[0]);
    return r;
  }
  {
    std::lock_guard<std::mutex> lock(running_mutex());
    running_supervisors().insert(supervisor);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(spec.timeout_ms);
  r.error = read_all(out[0], deadline, spec.max_output_bytes, r.output, spec.timeout_ms, spec.cancelled);
  if (r.error.empty()) {
    r.wait_status = read_wait_status(status_pipe[0], deadline, spec.cancelled);
    if (!r.wait_status)
      r.error = spec.cancelled && spec.cancelled() ? kCancelledError
                : ms_left(deadline) > 0            ? "the command's supervisor ended unexpectedly"
                                                   : "timed out after " + std::to_string(spec.timeout_ms) + " ms";
    else
      r.error = exit_error(*r.wait_status, spec);
  }
  close(out[0]);
  {  // out of the set before it is reaped, so its pid is never signalled after reuse
    std::lock_guard<std::mutex> lock(running_mutex());
    running_supervisors().erase(supervisor);
  }
  kill(supervisor, SIGTERM);  // whatever the command left running goes with it
  int status = 0;
  while (waitpid(supervisor, &status, 0) < 0 && errno == EINTR) {
  }
  close(status_pipe[0]);  // only now: the supervisor may report the command's exit until it ends
  return r;
}

}  // namespace autoglm
