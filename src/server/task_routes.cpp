// POST /v1/tasks: a task (server/task_pipeline) on its own thread, answered when it is done;
// the tool registry the tasks call, and the count of tasks running (the service waits for
// them before it goes away).
#include "server/task_routes.h"

#include <thread>

#include "core/last_resort.h"
#include "server/api/choice_streams.h"
#include "tasks/subprocess.h"

namespace autoglm {

TaskRoutes::TaskRoutes(const ServerConfig& config, ServerMetrics& metrics, InFlight& in_flight)
    : config_(config), metrics_(metrics), in_flight_(in_flight) {}

TaskRoutes::~TaskRoutes() {
  wait_idle();
  release();
}

Status TaskRoutes::start(TaskPipeline::RuntimeSource runtime, const std::optional<ListenAddress>& listening) {
  AUTOGLM_ASSIGN_OR_RETURN(tools_, ToolRegistry::build(config_.tools, config_.http_allowlist, listening));
  tasks_ = std::make_shared<TaskPipeline>(std::move(runtime), tools_, config_.task);
  return Status::ok();
}

void TaskRoutes::bind(HandlerTable& table) {
  table.bind(Endpoint::kTasks,
             [this](const HttpRequest& req, const RouteLookup&) { return run_task(req.body, api_key_of(req)); });
}

void TaskRoutes::wait_idle() {
  std::unique_lock<std::mutex> lock(tasks_mutex_);
  tasks_done_.wait(lock, [&] { return tasks_running_ == 0; });
}

void TaskRoutes::release() {
  tasks_.reset();
}

int64_t TaskRoutes::running() {
  std::lock_guard<std::mutex> lock(tasks_mutex_);
  return tasks_running_;
}

void TaskRoutes::terminate_commands() {
  terminate_running_commands();
}

const ToolStats* TaskRoutes::tool_stats() const {
  return tools_ ? &tools_->stats() : nullptr;
}

// POST /v1/tasks {"input", "session"?, "max_steps"?, "seed"?, "force_action"?}: runs on its own
// thread (a task waits on several generations and tools) and replies when it is done.
// The body as a task request (throws ParamError naming the field; a session that is not the
// caller's live one is a 404 naming 'session', thrown as an EarlyReply).
std::shared_ptr<TaskRequest> TaskRoutes::task_request(const std::string& body, const std::string& api_key) const {
  const json j = parse_body(body, config_.runtime.limits);
  if (!j.contains("input") || !j["input"].is_string() || j["input"].get<std::string>().empty())
    bad("input", "'input' must be a non-empty string");
  auto request = std::make_shared<TaskRequest>();
  request->input = check_utf8(j["input"].get<std::string>(), "input");
  request->owner = config_.api_keys.empty() ? "" : api_key;
  if (j.contains("session") && !j["session"].is_null()) {
    if (!j["session"].is_string()) bad("session", "'session' must be a string");
    request->session = j["session"];
    if (!tasks_->has_session(request->session, request->owner))
      answer_now(error_reply(404, "session '" + request->session + "' does not exist or has expired", "session"));
  }
  request->max_steps = int(integer_param(j, "max_steps", 1, 32, 0));
  if (j.contains("seed") && !j["seed"].is_null()) request->seed = uint64_t(integer_param(j, "seed", 0, INT64_MAX, 0));
  if (j.contains("force_action") && !j["force_action"].is_null()) {
    const std::string f = j["force_action"].is_string() ? j["force_action"].get<std::string>() : "";
    if (f != "call" && f != "clarify" && f != "finish")
      bad("force_action", "'force_action' must be call, clarify or finish");
    request->force_action = f;
  }
  request->who =
      api_key.empty() ? "anonymous" : "key ..." + api_key.substr(api_key.size() - std::min<size_t>(4, api_key.size()));
  if (auto it = config_.tool_access.find(api_key); it != config_.tool_access.end())
    request->allowed_tools = &it->second;  // config_ outlives the task: the service waits for tasks
  return request;
}

Reply TaskRoutes::run_task(const std::string& body, const std::string& api_key) {
  std::shared_ptr<TaskRequest> request = task_request(body, api_key);
  auto [handle, append] = StreamHandle::relay();
  // The reply's handle is cancelled when the client goes (or a drain ends it): the task stops.
  request->cancelled = [weak = std::weak_ptr<StreamHandle>(handle)] {
    const auto h = weak.lock();
    return !h || h->cancelled();
  };
  auto tasks = tasks_;
  ServerMetrics* metrics = &metrics_;
  {
    std::lock_guard<std::mutex> lock(tasks_mutex_);
    if (tasks_running_ >= config_.runtime.max_queued)  // each task holds a thread: bound them like the queue
      return busy_reply("too many tasks running");
    ++tasks_running_;
  }
  // A failure the request caused (an input too long for the context) is a 4xx naming the
  // field; the thread sets it before the handle publishes the event.
  auto failure = std::make_shared<std::pair<int, std::string>>(500, "");
  std::thread([this, tasks, request, handle, append, metrics, failure]() mutable {
    StreamEvent ev;
    ev.finished = true;
    const auto fail = [&](const std::string& message) {
      metrics->count_task("error");
      ev.finish_reason = FinishReason::kError;
      ev.error = message;
    };
    run_guarded(
        "task",
        [&] {
          auto result = tasks->run(*request);
          if (!result) {
            const StatusCode code = result.status().code();
            if (code == StatusCode::kInvalidArgument || code == StatusCode::kOutOfRange) *failure = {400, "input"};
            if (code == StatusCode::kNotFound) *failure = {404, "session"};
            if (code == StatusCode::kResourceExhausted) *failure = {429, ""};
            return fail(result.status().message());
          }
          metrics->count_task((*result)["status"]);
          ev.text = result->dump(-1, ' ', false, json::error_handler_t::replace);
        },
        [&](const std::string& what) { fail("internal error: " + what); });
    append(std::move(ev));
    // Nothing of the service may be touched after the count reaches 0 (its destructor may run
    // at once): the pipeline, the request and the handle are released first.
    tasks.reset();
    request.reset();
    handle.reset();
    std::lock_guard<std::mutex> lock(tasks_mutex_);
    if (--tasks_running_ == 0) tasks_done_.notify_all();
  }).detach();
  Reply r;
  r.stream = std::make_shared<ChoiceStreams>(handle, 1, nullptr);
  r.input_end_cancels = true;
  // In flight until the reply has been sent, not only until the task is done.
  r.consume = [in_flight = in_flight_.track(handle), failure](const StreamEvent& ev, size_t) {
    ReplyChunk chunk;
    chunk.complete = true;
    chunk.status = ev.finish_reason == FinishReason::kError ? failure->first : http_status_of(ev.finish_reason);
    const char* type = chunk.status >= 500   ? "server_error"
                       : chunk.status == 429 ? "rate_limit_error"
                                             : "invalid_request_error";
    chunk.bytes = ev.finish_reason != FinishReason::kError
                      ? ev.text
                      : error_reply(chunk.status, ev.error, failure->second, type).body;
    return chunk;
  };
  // A full engine queue is a 429 that says when to come back, as busy_reply does.
  r.decided = [failure]() {
    Reply::Decided d;
    if (failure->first == 429) d.headers = {{"Retry-After", "1"}};
    return d;
  };
  return r;
}

}  // namespace autoglm
