// Running a registered tool. A failure, a timeout or an oversized output is an outcome with
// an error, never an exception or a crash; every run is logged (who, tool, arguments,
// status, duration) through the log sink and counted in the registry's stats.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tasks/fd_read.h"
#include "tasks/tools.h"

namespace autoglm {

struct ToolOutcome {
  bool ok = false;
  std::string output;  // stdout+stderr, the HTTP body, or the builtin's answer
  std::string error;   // why it failed
  double ms = 0;
};

// `arguments` must already satisfy the tool's schema (the pipeline generates them under it).
// `who`: the caller as the log should name it (the server passes "key ...abcd" or "anonymous").
// The arguments after the tool's argument rules (tools.h, ArgumentRule): an error names the
// tool and the parameter; confined paths come back resolved.
Result<nlohmann::json> checked_arguments(const Tool& tool, const nlohmann::json& arguments);

// `cancelled` is asked while the tool runs: once true, a command is killed (with all it
// started) and an HTTP request abandoned; the outcome's error is then "cancelled".
ToolOutcome execute_tool(const ToolRegistry& registry, const Tool& tool, const nlohmann::json& arguments,
                         const std::string& who, const CancelCheck& cancelled = {});

// A template with each {name} replaced by that argument's text; each value is encoded with
// `encode` (identity for argv elements: a value stays one argument whatever it holds).
std::string fill_placeholders(const std::string& text, const nlohmann::json& arguments, bool url_encode);

}  // namespace autoglm
