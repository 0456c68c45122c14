// The task pipeline behind POST /v1/tasks: a request in natural language becomes tool calls
// and a structured result. Input that names a tool explicitly (one of its triggers) goes to
// that tool: the model writes its arguments under the tool's schema. Otherwise the model
// chooses, constrained to {"action": "call", "tool": <a registered name>, "arguments": <its
// schema>} or {"action": "clarify", "question": ...}; after a tool result it may call another
// tool or {"action": "finish", "answer": ...}, up to max_steps. Every step is recorded. A
// clarification keeps the session, which the client continues with the same `session`;
// sessions expire after a TTL and, because each turn's prompt extends the last, reuse the
// prefix cache. A cancelled task stops between steps and stops the tool it runs; its turn is
// not kept in the session.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/runtime.h"
#include "tasks/fd_read.h"
#include "tasks/tools.h"

namespace autoglm {

struct TaskOptions {
  int max_steps = 4;
  double session_ttl_seconds = 900;
  int32_t max_tokens = 256;  // per generation step
  float temperature = 0.7f;
};

struct TaskRequest {
  std::string input;
  std::string session;       // empty: a new one
  std::string owner;         // the caller's API key ("" when keys are off): only it may continue the session
  std::string force_action;  // "", "call", "clarify", "finish": restricts the choice
  const std::vector<std::string>* allowed_tools = nullptr;  // the caller's allow-list; null: all
  std::string who;                                          // for the execution log
  std::optional<uint64_t> seed;
  int max_steps = 0;  // 0: the pipeline's default
  // True once the task should stop (its client went away): no further step runs, a running
  // generation or tool is stopped, and the result's status is "cancelled". Empty: never.
  CancelCheck cancelled;
};

class TaskPipeline {
 public:
  // A runtime for one step's generation, and what keeps it usable until dropped (a server's
  // hold on a model that may otherwise unload).
  struct HeldRuntime {
    Runtime* runtime = nullptr;
    std::shared_ptr<void> hold;
  };
  using RuntimeSource = std::function<Result<HeldRuntime>()>;

  // Generates on `runtime` (its chat template renders each step's conversation), which must
  // outlive the pipeline.
  TaskPipeline(Runtime& runtime, std::shared_ptr<const ToolRegistry> tools, TaskOptions options);
  // Generates on the runtime `source` gives for each step.
  TaskPipeline(RuntimeSource source, std::shared_ptr<const ToolRegistry> tools, TaskOptions options);

  // The result object; errors only for a request that cannot run (unknown session: not_found).
  Result<nlohmann::json> run(const TaskRequest& request);

  // True while `id` is a live session of `owner`; another owner's session looks like no session.
  bool has_session(const std::string& id, const std::string& owner) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Session {
    std::string owner;
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    Clock::time_point last_used;
  };
  struct Run;

  Result<std::string> generate(const nlohmann::ordered_json& messages, const nlohmann::json& tools,
                               const std::string& grammar, const TaskRequest& request, int step);
  nlohmann::json decision_schema(const std::vector<const Tool*>& tools, bool may_finish,
                                 const std::string& force) const;
  std::vector<const Tool*> allowed(const TaskRequest& request) const;
  Result<std::string> open_session(const TaskRequest& request, Session& out);
  // The live session `id` of `owner`, or null; with mutex_ held.
  const Session* find_session(const std::string& id, const std::string& owner) const;
  void save_session(const std::string& id, Session session);

  RuntimeSource runtime_;
  std::shared_ptr<const ToolRegistry> tools_;
  TaskOptions options_;
  mutable std::mutex mutex_;
  std::map<std::string, Session> sessions_;
};

}  // namespace autoglm
