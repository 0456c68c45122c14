#include "tasks/task_pipeline.h"

#include "core/random_id.h"
#include "sample/json_schema.h"
#include "tasks/executors.h"

namespace autoglm {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr char kDecideInstruction[] =
    "You carry out the user's task with the tools you have. Answer with one JSON object: "
    "{\"action\": \"call\", \"tool\": <tool name>, \"arguments\": {...}} to use a tool, "
    "{\"action\": \"clarify\", \"question\": \"...\"} when the request is unclear, or "
    "{\"action\": \"finish\", \"answer\": \"...\"} once the tool results answer it.";

std::string tool_call_id(size_t step) {
  return "call_task_" + std::to_string(step);
}

bool is_cancelled(const TaskRequest& r) {
  return r.cancelled && r.cancelled();
}

// How often a step's generation looks at the task's cancel check while it waits.
constexpr auto kCancelPoll = std::chrono::milliseconds(20);
constexpr auto kGenerationTimeout = std::chrono::minutes(10);  // between two events

// The result of a task stopped early: the steps so far, nothing kept in the session.
json& mark_cancelled(json& result) {
  result["status"] = "cancelled";
  result["error"] = "the task was cancelled (its client went away, or the server is stopping)";
  return result;
}

}  // namespace

TaskPipeline::TaskPipeline(Runtime& runtime, std::shared_ptr<const ToolRegistry> tools, TaskOptions options)
    : TaskPipeline(
          [&runtime]() -> Result<HeldRuntime> {
            return HeldRuntime{&runtime, nullptr};
          },
          std::move(tools), options) {}

TaskPipeline::TaskPipeline(RuntimeSource source, std::shared_ptr<const ToolRegistry> tools, TaskOptions options)
    : runtime_(std::move(source)), tools_(std::move(tools)), options_(options) {}

const TaskPipeline::Session* TaskPipeline::find_session(const std::string& id, const std::string& owner) const {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  const bool live =
      std::chrono::duration<double>(Clock::now() - it->second.last_used).count() <= options_.session_ttl_seconds;
  return constant_time_equal(it->second.owner, owner) && live ? &it->second : nullptr;
}

bool TaskPipeline::has_session(const std::string& id, const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return find_session(id, owner) != nullptr;
}

std::vector<const Tool*> TaskPipeline::allowed(const TaskRequest& r) const {
  std::vector<const Tool*> out;
  for (const Tool& t : tools_->tools())
    if (!r.allowed_tools ||
        std::find(r.allowed_tools->begin(), r.allowed_tools->end(), t.config.name) != r.allowed_tools->end())
      out.push_back(&t);
  return out;
}

json TaskPipeline::decision_schema(const std::vector<const Tool*>& tools, bool may_finish,
                                   const std::string& force) const {
  json branches = json::array();
  if (force.empty() || force == "call")
    for (const Tool* t : tools)
      branches.push_back(
          {{"type", "object"},
           {"properties",
            {{"action", {{"const", "call"}}}, {"tool", {{"const", t->config.name}}}, {"arguments", t->parameters}}},
           {"required", {"action", "tool", "arguments"}}});
  if (force.empty() || force == "clarify")
    branches.push_back(
        {{"type", "object"},
         {"properties", {{"action", {{"const", "clarify"}}}, {"question", {{"type", "string"}, {"maxLength", 200}}}}},
         {"required", {"action", "question"}}});
  if ((force.empty() && may_finish) || force == "finish")
    branches.push_back(
        {{"type", "object"},
         {"properties", {{"action", {{"const", "finish"}}}, {"answer", {{"type", "string"}, {"maxLength", 400}}}}},
         {"required", {"action", "answer"}}});
  return {{"anyOf", branches}};
}

Result<std::string> TaskPipeline::generate(const ordered_json& messages, const json& tools, const std::string& gbnf,
                                           const TaskRequest& request, int step) {
  Request g;
  Conversation chat;
  chat.messages_json = messages.dump();
  chat.tools_json = tools.empty() ? "" : tools.dump();  // with the tool definitions the template shows
  g.chat = std::move(chat);
  g.constraint.kind = ConstraintKind::kGbnf;
  g.constraint.text = gbnf;
  g.constraint.source = "task grammar";
  g.max_tokens = options_.max_tokens;
  g.sampling.temperature = options_.temperature;
  g.sampling.top_k = 0;
  g.sampling.top_p = 1;
  g.sampling.min_p = 0;
  if (request.seed) g.sampling.seed = *request.seed + uint64_t(step);
  g.cache_salt = request.owner;  // each key its own cached prefixes
  // With tools the runtime splits the reply into typed parts as well; ev.text stays the raw
  // text, the JSON the grammar made, which is what is read here.
  AUTOGLM_ASSIGN_OR_RETURN(const HeldRuntime held, runtime_());  // held until the step's reply is read
  AUTOGLM_ASSIGN_OR_RETURN(auto handle, held.runtime->submit(g));
  std::string text;
  StreamEvent ev;
  auto deadline = Clock::now() + kGenerationTimeout;  // this long without an event: timed out
  while (Clock::now() < deadline) {
    if (!handle->next(ev, kCancelPoll)) {
      if (!is_cancelled(request)) continue;
      handle->cancel();  // the engine frees the sequence within a step
      return Status(StatusCode::kInternal, "generation cancelled");
    }
    deadline = Clock::now() + kGenerationTimeout;
    text += ev.text;
    if (ev.finished) {
      if (ev.finish_reason == FinishReason::kError)
        return Status(StatusCode::kInternal, "generation failed: " + ev.error);
      return text;
    }
  }
  handle->cancel();
  return Status(StatusCode::kInternal, "generation timed out");
}

Result<std::string> TaskPipeline::open_session(const TaskRequest& request, Session& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = Clock::now();
  for (auto it = sessions_.begin(); it != sessions_.end();)  // drop expired sessions
    it = std::chrono::duration<double>(now - it->second.last_used).count() > options_.session_ttl_seconds
             ? sessions_.erase(it)
             : std::next(it);
  if (request.session.empty()) {
    out.owner = request.owner;
    return random_id("task_");
  }
  const Session* found = find_session(request.session, request.owner);
  if (!found) return not_found("session '" + request.session + "' does not exist or has expired");
  out = *found;
  return request.session;
}

void TaskPipeline::save_session(const std::string& id, Session session) {
  std::lock_guard<std::mutex> lock(mutex_);
  session.last_used = Clock::now();
  sessions_[id] = std::move(session);
}

Result<json> TaskPipeline::run(const TaskRequest& request) {
  Session session;
  AUTOGLM_ASSIGN_OR_RETURN(const std::string id, open_session(request, session));
  session.messages.push_back({{"role", "user"}, {"content", request.input}});
  const std::vector<const Tool*> tools = allowed(request);
  json tool_defs = json::array();
  for (const Tool* t : tools) tool_defs.push_back(t->openai());
  const int max_steps = request.max_steps > 0 ? request.max_steps : options_.max_steps;
  json result = {{"status", "done"}, {"steps", json::array()}, {"answer", nullptr}, {"session", id}};
  json& steps = result["steps"];
  auto system = [&](const std::string& text) {
    ordered_json m = ordered_json::array({{{"role", "system"}, {"content", text}}});
    for (const auto& x : session.messages) m.push_back(x);
    return m;
  };

  // A tool named explicitly by the input: its arguments first, no choice.
  const Tool* forced =
      request.force_action.empty() ? tools_->triggered_by(request.input, request.allowed_tools) : nullptr;
  for (int step = 0; step < max_steps; ++step) {
    if (is_cancelled(request)) return mark_cancelled(result);
    const Tool* tool = nullptr;
    json arguments;
    if (step == 0 && forced) {
      auto gbnf = json_schema_to_gbnf(forced->parameters);
      if (!gbnf) return Status(gbnf.status().code(), "tool '" + forced->config.name + "': " + gbnf.status().message());
      auto text = generate(system("Call the tool '" + forced->config.name + "' (" + forced->config.description +
                                  "). Answer with its arguments as one JSON object."),
                           tool_defs, *gbnf, request, step);
      if (!text) return is_cancelled(request) ? Result<json>(mark_cancelled(result)) : text.status();
      tool = forced;
      arguments = json::parse(*text, nullptr, false);
    } else {
      auto gbnf = json_schema_to_gbnf(decision_schema(tools, !steps.empty(), request.force_action));
      if (!gbnf) return gbnf.status();
      auto text = generate(system(kDecideInstruction), tool_defs, *gbnf, request, step);
      if (!text) return is_cancelled(request) ? Result<json>(mark_cancelled(result)) : text.status();
      const json decision = json::parse(*text, nullptr, false);
      const std::string action = decision.is_object() ? decision.value("action", "") : "";
      if (action == "clarify") {
        result["status"] = "needs_clarification";
        result["question"] = decision.value("question", "");
        session.messages.push_back({{"role", "assistant"}, {"content", decision.value("question", "")}});
        save_session(id, session);
        return result;
      }
      if (action == "finish") {
        result["answer"] = decision.value("answer", "");
        session.messages.push_back({{"role", "assistant"}, {"content", decision.value("answer", "")}});
        save_session(id, session);
        return result;
      }
      if (action != "call") {  // the grammar makes this unreachable unless generation was cut off
        result["status"] = "failed";
        result["error"] = "the model's decision was not complete JSON: " + *text;
        save_session(id, session);
        return result;
      }
      tool = tools_->find(decision.value("tool", ""));
      arguments = decision.value("arguments", json::object());
    }
    if (!tool || !arguments.is_object()) {
      result["status"] = "failed";
      result["error"] = "the model produced no usable arguments";
      save_session(id, session);
      return result;
    }
    const ToolOutcome outcome = execute_tool(*tools_, *tool, arguments, request.who, request.cancelled);
    json record = {
        {"tool", tool->config.name}, {"arguments", arguments}, {"result", outcome.output}, {"ms", outcome.ms}};
    if (!outcome.ok) record["error"] = outcome.error;
    steps.push_back(record);
    if (is_cancelled(request)) return mark_cancelled(result);
    const std::string call_id = tool_call_id(steps.size());
    session.messages.push_back(
        {{"role", "assistant"},
         {"content", ""},
         {"tool_calls", ordered_json::array({{{"id", call_id},
                                              {"type", "function"},
                                              {"function", {{"name", tool->config.name}, {"arguments", arguments}}},
                                              {"name", tool->config.name},
                                              {"arguments", arguments}}})}});
    session.messages.push_back({{"role", "tool"},
                                {"tool_call_id", call_id},
                                {"content", outcome.ok ? outcome.output : "error: " + outcome.error}});
  }
  // Out of steps: the last result is the answer (or the failure).
  const json& last = steps.back();
  if (last.contains("error")) {
    result["status"] = "failed";
    result["error"] = last["error"];
  } else {
    result["answer"] = last["result"];
  }
  save_session(id, session);
  return result;
}

}  // namespace autoglm
