// Runs a tool's command confined to what the server means to give it: the argv as given
// (execve, no shell), the environment given, stdin /dev/null, stdout and stderr into one
// capture pipe and no other descriptor of the server (no listening socket, no client
// connection). A small supervisor process stands between the server and the command and is
// its child subreaper, so whatever the command leaves behind (a daemon, a `setsid` escapee
// outside its process group) is reparented to the supervisor and killed with it: at the
// timeout, once the command has exited, and when the server (its thread) goes away.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tasks/fd_read.h"

namespace autoglm {

struct CommandSpec {
  std::vector<std::string> argv;  // argv[0] an absolute path
  std::vector<std::string> env;   // NAME=value, the whole environment
  std::string cwd;                // empty: the server's
  int64_t timeout_ms = 10000;
  int64_t max_output_bytes = 65536;
  CancelCheck cancelled;  // true: the command is killed and the run ends with "cancelled"
};

struct CommandResult {
  std::string output;              // stdout and stderr, interleaved, at most max_output_bytes
  std::string error;               // empty when the command ran to its end and exited 0: a timeout, the
                                   // output cap, "cancelled", "could not run ...", "exited with status N", ...
  std::optional<int> wait_status;  // the command's status as waitpid gives it, when it ended
};

CommandResult run_confined(const CommandSpec& spec);

// Ends every command running now (their supervisors kill all they started); the runs return
// with an error. For a server that stops while tools still run.
void terminate_running_commands();

}  // namespace autoglm
