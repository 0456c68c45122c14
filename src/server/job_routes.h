// Async jobs and OpenAI's Files and Batch APIs over HTTP (the stores: server/jobs/), and the
// runners' side: a job is answered by its route's handler as a typed call, never as made-up
// HTTP. Off (404s naming jobs.data_dir) unless jobs.data_dir is set.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "server/catalog.h"
#include "server/generation_routes.h"
#include "server/handler_table.h"
#include "server/jobs/async_jobs.h"
#include "server/jobs/batches.h"
#include "server/task_routes.h"

namespace autoglm {

// A request body's `metadata` as stored: an object of at most 16 string values, as OpenAI's
// ("" : none); otherwise a 400 naming 'metadata' (thrown as bad() does).
std::string metadata_text(const json& body);

class JobRoutes {
 public:
  // `interrupted`: the server is stopping or draining (a job then is left to resume).
  JobRoutes(const ServerConfig& config, ModelCatalog& catalog, GenerationRoutes& generation, TaskRoutes& tasks,
            std::function<bool()> interrupted);
  // Opens the stores (errors name jobs.data_dir and the file); run() starts the runners.
  Status start();
  void run();
  // Stops the runners (they call the engines and the batches), then closes the stores.
  void stop();
  void bind(HandlerTable& table);
  // The jobs' and batches' metrics, read from the store at each scrape (nothing when off).
  void metrics(std::string& out);

 private:
  // `endpoint`: the synchronous route the job runs (chat completions, completions or tasks).
  Reply submit_job(Endpoint endpoint, const std::string& body, const std::string& api_key);
  Reply job(const std::string& method, const std::string& id, const std::string& api_key);
  Reply jobs(const std::string& target, const std::string& api_key);
  std::pair<int, std::string> run_job(const Job& job, const std::string& api_key, JobRun& run);
  Reply job_reply(const Job& job, const std::string& api_key);
  Reply files_route(const HttpRequest& request, const std::string& api_key);
  Reply upload_file(const HttpRequest& request, const std::string& api_key);
  Reply batches_route(const HttpRequest& request, const std::string& api_key);
  Reply create_batch(const std::string& body, const std::string& api_key);

  const ServerConfig& config_;
  ModelCatalog& catalog_;
  GenerationRoutes& generation_;
  TaskRoutes& tasks_;
  std::function<bool()> interrupted_;
  std::unique_ptr<AsyncJobs> jobs_;   // null: jobs.data_dir not set
  std::unique_ptr<Batches> batches_;  // with jobs_
};

}  // namespace autoglm
