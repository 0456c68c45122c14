// POST /v1/tasks: the task pipeline (tasks/task_pipeline.h) on the first model, each task on
// its own thread; the tools it calls; the tasks running, which stop() waits for.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "autoglm/runtime.h"
#include "server/config/config.h"
#include "server/handler_table.h"
#include "server/in_flight.h"
#include "server/metrics/metrics.h"
#include "tasks/task_pipeline.h"
#include "tasks/tools.h"

namespace autoglm {

class TaskRoutes {
 public:
  TaskRoutes(const ServerConfig& config, ServerMetrics& metrics, InFlight& in_flight);
  ~TaskRoutes();
  // The tools (checked against the configuration; http tools never target `listening`) and the
  // pipeline over `runtime`.
  Status start(TaskPipeline::RuntimeSource runtime, const std::optional<ListenAddress>& listening);
  void bind(HandlerTable& table);
  // A task's reply (HTTP or a job): runs on its own thread, replies when it is done.
  Reply run_task(const std::string& body, const std::string& api_key);
  int64_t running();
  // Ends the tool commands tasks are running (their step fails).
  void terminate_commands();
  // Waits for the tasks running; release() then lets the pipeline go (after the job runners,
  // which start tasks, have stopped).
  void wait_idle();
  void release();
  const ToolStats* tool_stats() const;  // null before start

 private:
  std::shared_ptr<TaskRequest> task_request(const std::string& body, const std::string& api_key) const;

  const ServerConfig& config_;
  ServerMetrics& metrics_;
  InFlight& in_flight_;
  std::shared_ptr<ToolRegistry> tools_;
  std::shared_ptr<TaskPipeline> tasks_;
  std::mutex tasks_mutex_;
  std::condition_variable tasks_done_;
  int tasks_running_ = 0;
};

}  // namespace autoglm
