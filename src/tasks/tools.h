// Tools registered in the configuration (no code): name, description, a JSON Schema for the
// arguments, optional triggers (regexes, case-insensitive, that name the tool explicitly in
// a task), and an executor: a command (argv with {param} placeholders, never a shell), an
// HTTP endpoint (hosts on an allowlist), or a builtin. Checked whole at start-up; errors give
// the key path (tools[2].exec.command[0]) and the reason.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "tokenizer/regex.h"

namespace autoglm {

struct ToolExec {
  std::vector<std::string> command;  // argv; argv[0] an absolute path
  std::string cwd;                   // working directory (default: the server's); confines path values (ArgumentRule)
  std::vector<std::string> env;      // names of environment variables passed through (none by default)
  std::string method = "POST", url;  // http
  std::vector<std::pair<std::string, std::string>> headers;
  // http: whether {param} placeholders may stand in the URL's host or port (off: a model could
  // reach any port of an allowlisted host). The host must be on the allowlist either way.
  bool allow_placeholder_host_port = false;
  std::string builtin;  // calculator, current_time, echo
  int64_t timeout_ms = 10000;
  int64_t max_output_bytes = 65536;
};

// What a model-chosen argument may be, beyond its schema (tools[i].arguments.NAME). Values
// come from a model that reads untrusted text, so by default none may start with '-' (it
// would reach a command as an option), and a command tool with a `cwd` keeps every value
// under it as a path would be (an operator who sets cwd means the tool to stay there).
struct ArgumentRule {
  bool allow_leading_dash = false;
  std::string path_under;   // the value is a path that must resolve (.., symlinks) under this directory
                            // (the command gets it resolved); empty: the tool's cwd, if it has one
  bool not_a_path = false;  // the value is text, not a path: the cwd does not confine it
};

struct ToolConfig {
  std::string name;
  std::string description;
  std::string parameters_json = "{\"type\": \"object\"}";  // JSON Schema of the arguments
  std::vector<std::string> triggers;
  ToolExec exec;
  std::map<std::string, ArgumentRule> arguments;  // by parameter name
};

const std::vector<std::string>& builtin_tool_names();

struct Tool {
  ToolConfig config;
  nlohmann::json parameters;
  std::vector<std::shared_ptr<const Regex>> triggers;
  // {"type": "function", "function": {name, description, parameters}} for chat templates.
  nlohmann::json openai() const;
};

// Executions per tool and outcome, for /metrics.
struct ToolStats {
  struct Counts {
    int64_t ok = 0, error = 0;
    double seconds = 0;
  };
  mutable std::mutex mutex;
  std::map<std::string, Counts> by_tool;
  void record(const std::string& tool, bool ok, double seconds);
  std::map<std::string, Counts> snapshot() const;
};

// Where the server's own API listens: never the target of an http tool, whatever its URL.
struct ListenAddress {
  std::string host;  // an IP address; 0.0.0.0 or :: (every address of the machine)
  int port = 0;
};

class ToolRegistry {
 public:
  // `http_allowlist`: hosts an http tool may reach (default: loopback names and addresses).
  static Result<std::shared_ptr<ToolRegistry>> build(const std::vector<ToolConfig>& configs,
                                                     std::vector<std::string> http_allowlist = {},
                                                     std::optional<ListenAddress> own_address = std::nullopt);

  const std::vector<Tool>& tools() const { return tools_; }
  const Tool* find(const std::string& name) const;
  // The first tool (of `allowed`, all when null) one of whose triggers matches the input.
  const Tool* triggered_by(const std::string& input, const std::vector<std::string>* allowed) const;
  const std::vector<std::string>& http_allowlist() const { return http_allowlist_; }
  const std::optional<ListenAddress>& own_address() const { return own_address_; }
  ToolStats& stats() const { return stats_; }

 private:
  std::vector<Tool> tools_;
  std::vector<std::string> http_allowlist_;
  std::optional<ListenAddress> own_address_;
  mutable ToolStats stats_;
};

// Placeholders {name} in a template string, in order.
std::vector<std::string> placeholders(const std::string& text);
// The host of an http:// URL ("" if it is not one).
std::string url_host(const std::string& url);
// The authority (host and port) of an http:// URL ("" if it is not one).
std::string url_authority(const std::string& url);

}  // namespace autoglm
