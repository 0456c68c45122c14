// Asynchronous jobs over HTTP: POST /v1/async/{chat/completions, completions, tasks} accept a
// request (202 and the job), GET /v1/jobs[/{id}] and DELETE /v1/jobs/{id}; and the runner's
// side, which answers a job through its route's handler. OpenAI's Files and Batch APIs: POST/GET
// /v1/files, GET /v1/files/{id}[/content], DELETE /v1/files/{id}; POST/GET /v1/batches, GET
// /v1/batches/{id}, POST /v1/batches/{id}/cancel. Only the key that made a job, file or batch
// sees it.
#include <chrono>
#include <condition_variable>

#include "server/api/list_page.h"
#include "server/api/multipart.h"
#include "server/api/openai_request.h"
#include "server/job_routes.h"

namespace autoglm {
std::string metadata_text(const json& body) {
  if (!body.contains("metadata") || body["metadata"].is_null()) return "";
  const json& m = body["metadata"];
  if (!m.is_object() || m.size() > 16) bad("metadata", "'metadata' must be an object of at most 16 keys");
  for (const auto& [k, v] : m.items())
    if (!v.is_string() || v.get<std::string>().size() > 512 || k.size() > 64)
      bad("metadata", "'metadata' values must be strings (keys up to 64, values up to 512 bytes)");
  return m.dump();
}

JobRoutes::JobRoutes(const ServerConfig& config, ModelCatalog& catalog, GenerationRoutes& generation, TaskRoutes& tasks,
                     std::function<bool()> interrupted)
    : config_(config),
      catalog_(catalog),
      generation_(generation),
      tasks_(tasks),
      interrupted_(std::move(interrupted)) {}

Status JobRoutes::start() {
  if (config_.jobs.data_dir.empty()) return Status::ok();
  AUTOGLM_ASSIGN_OR_RETURN(jobs_, AsyncJobs::start(config_.jobs, config_.api_keys,
                                                   [this](const Job& job, const std::string& key, JobRun& run) {
                                                     return run_job(job, key, run);
                                                   }));
  AUTOGLM_ASSIGN_OR_RETURN(batches_, Batches::start(*jobs_, config_.jobs));
  return Status::ok();
}

void JobRoutes::run() {
  if (jobs_) jobs_->run();
}

void JobRoutes::stop() {
  if (jobs_) jobs_->stop();
  batches_.reset();
  jobs_.reset();
}

void JobRoutes::bind(HandlerTable& table) {
  const auto key = [](const HttpRequest& req) { return api_key_of(req); };
  for (Endpoint async : {Endpoint::kAsyncChatCompletions, Endpoint::kAsyncCompletions, Endpoint::kAsyncTasks}) {
    const Endpoint sync = async == Endpoint::kAsyncChatCompletions ? Endpoint::kChatCompletions
                          : async == Endpoint::kAsyncCompletions   ? Endpoint::kCompletions
                                                                   : Endpoint::kTasks;
    table.bind(async, [this, sync, key](const HttpRequest& req, const RouteLookup&) {
      return submit_job(sync, req.body, key(req));
    });
  }
  table.bind(Endpoint::kListJobs,
             [this, key](const HttpRequest& req, const RouteLookup&) { return jobs(req.target, key(req)); });
  const RouteHandler one_job = [this, key](const HttpRequest& req, const RouteLookup& found) {
    return job(req.method, std::string(found.params["id"]), key(req));
  };
  table.bind(Endpoint::kGetJob, one_job);
  table.bind(Endpoint::kCancelJob, one_job);
  const RouteHandler files = [this, key](const HttpRequest& req, const RouteLookup&) {
    return files_route(req, key(req));
  };
  for (Endpoint e :
       {Endpoint::kUploadFile, Endpoint::kListFiles, Endpoint::kGetFile, Endpoint::kDeleteFile, Endpoint::kFileContent})
    table.bind(e, files);
  const RouteHandler batches = [this, key](const HttpRequest& req, const RouteLookup&) {
    return batches_route(req, key(req));
  };
  for (Endpoint e : {Endpoint::kCreateBatch, Endpoint::kListBatches, Endpoint::kGetBatch, Endpoint::kCancelBatch})
    table.bind(e, batches);
}

// POST /v1/async/...: the synchronous route's body plus `metadata` (an object of at most 16
// string values, as OpenAI's); checked now as far as it can be without running it.
Reply JobRoutes::submit_job(Endpoint endpoint, const std::string& body, const std::string& api_key) {
  if (!jobs_) return error_reply(404, "async jobs are off: set jobs.data_dir in the configuration");
  json j = parse_body(body, config_.runtime.limits);
  std::string callback_url;
  if (j.contains("callback_url") && !j["callback_url"].is_null()) {
    if (!j["callback_url"].is_string()) bad("callback_url", "'callback_url' must be a string");
    callback_url = j["callback_url"];
  }
  j.erase("callback_url");
  const std::string metadata = metadata_text(j);
  j.erase("metadata");
  if (j.value("stream", false)) bad("stream", "an async job is not streamed: its result is stored whole");
  if (endpoint == Endpoint::kTasks) {
    if (!j.contains("input") || !j["input"].is_string() || j["input"].get<std::string>().empty())
      bad("input", "'input' must be a non-empty string");
  } else {
    Target target;
    if (auto other = catalog_.resolve(j, target, true)) return *other;
    if (!target.route) {
      GenerationCall call = parse_generation_call(
          endpoint == Endpoint::kChatCompletions ? GenerationKind::kChat : GenerationKind::kCompletion, j, config_);
      call.api_key = api_key;
      generation_.check(call, target);
    }
  }
  auto job = jobs_->submit(std::string(endpoint_path(endpoint)), j.dump(), api_key, metadata, callback_url);
  if (!job && job.status().code() == StatusCode::kInvalidArgument) bad("callback_url", job.status().message());
  if (!job) return store_error_reply("the job could not be stored", job.status());
  return json_reply(202, job_json(*job, jobs_->callback(job->id)));
}

// GET /v1/jobs/{id}, DELETE /v1/jobs/{id}: only the key that submitted a job sees it.
Reply JobRoutes::job(const std::string& method, const std::string& id, const std::string& api_key) {
  if (!jobs_) return error_reply(404, "async jobs are off: set jobs.data_dir in the configuration");
  Result<std::optional<Job>> job =
      method == "DELETE" ? jobs_->cancel(id, api_key) : Result<std::optional<Job>>(jobs_->get(id, api_key));
  if (!job) return store_error_reply("the job could not be cancelled", job.status());
  if (!*job) return error_reply(404, "no job '" + id + "'");
  return json_reply(200, job_json(**job, jobs_->callback((*job)->id)));
}

// GET /v1/jobs?status=&limit=&after=: newest first, paged as OpenAI's lists are.
Reply JobRoutes::jobs(const std::string& target, const std::string& api_key) {
  if (!jobs_) return error_reply(404, "async jobs are off: set jobs.data_dir in the configuration");
  const PageQuery q = page_query(target);
  std::optional<JobStatus> status;
  if (q.other.count("status")) {
    status = job_status_from_name(q.other.at("status"));
    if (!status) bad("status", "'status' must be queued, in_progress, completed, failed or cancelled");
  }
  auto page = jobs_->list(api_key, status, q.after, q.limit + 1);
  if (!page) return error_reply(503, page.status().message(), "", "service_unavailable");
  return json_reply(200,
                    page_json(*page, q.limit, [&](const Job& job) { return job_json(job, jobs_->callback(job.id)); }));
}

// A job's reply from its route's handler: its stored body parsed as that route's request (a
// generation at the jobs' priority unless it names one), never a request made up as HTTP.
Reply JobRoutes::job_reply(const Job& job, const std::string& api_key) {
  const std::optional<Endpoint> endpoint = endpoint_from_path("POST", job.endpoint);
  if (endpoint == Endpoint::kTasks) return tasks_.run_task(job.body, api_key);
  if (endpoint != Endpoint::kChatCompletions && endpoint != Endpoint::kCompletions)
    return error_reply(404, "a job cannot run on " + job.endpoint + " (chat/completions, completions or tasks)");
  json body = parse_body(job.body, config_.runtime.limits);
  if (!body.contains("priority")) body["priority"] = config_.jobs.priority;
  const GenerationKind kind =
      endpoint == Endpoint::kChatCompletions ? GenerationKind::kChat : GenerationKind::kCompletion;
  GenerationCall call = parse_generation_call(kind, body, config_);
  call.api_key = api_key;
  return generation_.generate(call);
}

// A job through its synchronous route, as a non-streamed request at the jobs' priority; waits
// for the whole reply. `run` is armed to cancel the generation.
std::pair<int, std::string> JobRoutes::run_job(const Job& job, const std::string& api_key, JobRun& run) {
  const auto interrupted = [&] { return interrupted_(); };
  if (interrupted()) return {kJobInterrupted, ""};
  Reply reply = guarded_reply([&] { return job_reply(job, api_key); });
  if (!reply.stream) return {interrupted() ? kJobInterrupted : reply.status, reply.body};
  // The notifier may still run (on an engine thread) after this returns: it holds what it uses.
  struct Signal {
    std::mutex mutex;
    std::condition_variable arrived;
  };
  auto signal = std::make_shared<Signal>();
  reply.stream->set_notify([signal] {
    std::lock_guard<std::mutex> lock(signal->mutex);
    signal->arrived.notify_one();
  });
  run.arm([stream = reply.stream] { stream->cancel(); });
  StreamEvent ev;
  size_t choice = 0;
  for (;;) {
    while (reply.stream->try_next(ev, choice)) {
      ReplyChunk chunk = reply.consume(ev, choice);
      if (chunk.complete) {
        reply.stream->set_notify(nullptr);
        return {interrupted() ? kJobInterrupted : chunk.status, chunk.bytes};
      }
    }
    std::unique_lock<std::mutex> lock(signal->mutex);
    signal->arrived.wait_for(lock, std::chrono::milliseconds(50));
  }
}

namespace {

template <class Counts, class Name>
void status_gauge(std::string& out, const char* metric, const char* help, int statuses, const Counts& count_of,
                  Name name_of) {
  metric_header(out, metric, "gauge", help);
  for (int s = 0; s < statuses; ++s)
    out += std::string(metric) + "{status=\"" + name_of(s) + "\"} " + std::to_string(count_of(s)) + "\n";
}

}  // namespace

// The jobs' and batches' metrics, read from the store at each scrape.
void JobRoutes::metrics(std::string& out) {
  if (!jobs_) return;
  const auto jobs = jobs_->counts(), requests = batches_->request_counts();
  auto job_name = [](int s) { return job_status_name(JobStatus(s)); };
  auto in = [](const std::map<JobStatus, int64_t>& m) {
    return [&m](int s) { return m.count(JobStatus(s)) ? m.at(JobStatus(s)) : int64_t(0); };
  };
  status_gauge(out, "autoglm_jobs", "Async jobs in the store by status.", kJobStatusCount, in(jobs), job_name);
  metric_header(out, "autoglm_jobs_queue_depth", "gauge", "Async jobs and batch requests waiting for a runner.");
  metric_sample(out, "autoglm_jobs_queue_depth", double(jobs_->queue_depth()));
  metric_header(out, "autoglm_jobs_unwritten", "gauge",
                "Finished async jobs and batch requests whose end waits for room in the store.");
  metric_sample(out, "autoglm_jobs_unwritten", double(jobs_->unwritten_ends()));
  const auto outcomes = jobs_->callback_outcomes();
  metric_header(out, "autoglm_job_callback_attempts_total", "counter", "Callback attempts by outcome.");
  for (const char* outcome : {"delivered", "failed"}) {
    const auto it = outcomes.find(outcome);
    out += std::string("autoglm_job_callback_attempts_total{outcome=\"") + outcome + "\"} " +
           std::to_string(it == outcomes.end() ? 0 : it->second) + "\n";
  }
  const std::vector<int64_t> batches = batches_->counts();
  status_gauge(
      out, "autoglm_batches", "Batches in the store by status.", kBatchStatusCount, [&](int s) { return batches[s]; },
      [](int s) { return batch_status_name(BatchStatus(s)); });
  status_gauge(out, "autoglm_batch_requests", "Requests of unfinished batches by status (their progress).",
               kJobStatusCount, in(requests), job_name);
}

namespace {

std::string header(const HttpRequest& req, const std::string& name) {
  for (const auto& [k, v] : req.headers)
    if (k == name) return v;
  return "";
}

Reply jobs_off() {
  return error_reply(404, "files and batches are off: set jobs.data_dir in the configuration");
}

}  // namespace

Reply JobRoutes::files_route(const HttpRequest& req, const std::string& key) {
  if (!batches_) return jobs_off();
  const std::string path = path_of(req.target);
  if (path == "/v1/files") {
    if (req.method == "POST") return upload_file(req, key);
    const PageQuery q = page_query(req.target);
    const std::string purpose = q.other.count("purpose") ? q.other.at("purpose") : "";
    auto page = batches_->files(key, purpose, q.after, q.limit + 1);
    if (!page) return store_error_reply("the files could not be read", page.status());
    return json_reply(200, page_json(*page, q.limit, file_json));
  }
  std::string id = path.substr(std::string("/v1/files/").size());
  const bool content = id.size() > 8 && id.compare(id.size() - 8, 8, "/content") == 0;
  if (content) id.resize(id.size() - 8);
  const auto file = batches_->file(id, key);
  if (!file || (content && req.method != "GET")) return error_reply(404, "no file '" + id + "'");
  if (req.method == "DELETE") {
    auto removed = batches_->remove_file(id, key);
    if (!removed) return store_error_reply("the file could not be deleted", removed.status());
    return json_reply(200, {{"id", id}, {"object", "file"}, {"deleted", *removed}});
  }
  if (!content) return json_reply(200, file_json(*file));
  auto bytes = batches_->file_content(id, key);
  if (!bytes) return store_error_reply("the file could not be read", bytes.status());
  Reply r;
  r.content_type = "application/jsonl";
  r.body = std::move(bytes).value();
  return r;
}

// POST /v1/files: multipart with `file` and `purpose` (batch); the file is checked line by line
// as batch input before it is stored.
Reply JobRoutes::upload_file(const HttpRequest& req, const std::string& key) {
  auto parts = parse_multipart(header(req, "content-type"), req.body);
  if (!parts) bad("file", parts.status().message());
  const FormPart* purpose = form_field(*parts, "purpose");
  if (!purpose) bad("purpose", "the form has no 'purpose' field");
  if (purpose->data != "batch") bad("purpose", "'purpose' must be \"batch\" (got \"" + purpose->data + "\")");
  const FormPart* file = form_field(*parts, "file");
  if (!file) bad("file", "the form has no 'file' field");
  if (int64_t(file->data.size()) > config_.jobs.max_file_bytes)
    return error_reply(
        413, "the file is larger than jobs.max_file_bytes (" + std::to_string(config_.jobs.max_file_bytes) + " bytes)",
        "file");
  auto stored = batches_->upload(key, file->filename.empty() ? "upload.jsonl" : file->filename, file->data);
  if (!stored && stored.status().code() == StatusCode::kInvalidArgument)
    bad("file", (file->filename.empty() ? "" : file->filename + ": ") + stored.status().message());
  if (!stored) return store_error_reply("the file could not be stored", stored.status());
  return json_reply(200, file_json(*stored));
}

Reply JobRoutes::batches_route(const HttpRequest& req, const std::string& key) {
  if (!batches_) return jobs_off();
  const std::string path = path_of(req.target);
  if (path == "/v1/batches") {
    if (req.method == "POST") return create_batch(req.body, key);
    const PageQuery q = page_query(req.target);
    auto page = batches_->list(key, q.after, q.limit + 1);
    if (!page) return store_error_reply("the batches could not be read", page.status());
    return json_reply(200, page_json(*page, q.limit, batch_json));
  }
  std::string id = path.substr(std::string("/v1/batches/").size());
  const bool cancel = id.size() > 7 && id.compare(id.size() - 7, 7, "/cancel") == 0;
  if (cancel) id.resize(id.size() - 7);
  if (cancel != (req.method == "POST")) return error_reply(404, "no route " + req.method + " " + path);
  if (!cancel) {
    const auto batch = batches_->get(id, key);
    if (!batch) return error_reply(404, "no batch '" + id + "'");
    return json_reply(200, batch_json(*batch));
  }
  auto cancelled = batches_->cancel(id, key);
  if (!cancelled) return store_error_reply("the batch could not be cancelled", cancelled.status());
  if (!*cancelled) return error_reply(404, "no batch '" + id + "'");
  return json_reply(200, batch_json(**cancelled));
}

// POST /v1/batches: {input_file_id, endpoint, completion_window: "24h", metadata}.
Reply JobRoutes::create_batch(const std::string& body, const std::string& key) {
  const json j = parse_body(body, config_.runtime.limits);
  for (const char* field : {"input_file_id", "endpoint", "completion_window"})
    if (!j.contains(field) || !j[field].is_string()) bad(field, std::string("'") + field + "' must be a string");
  const std::string endpoint = j["endpoint"];
  if (endpoint != "/v1/chat/completions" && endpoint != "/v1/completions")
    bad("endpoint", "'endpoint' must be \"/v1/chat/completions\" or \"/v1/completions\"");
  if (j["completion_window"] != "24h") bad("completion_window", "'completion_window' must be \"24h\"");
  const std::string metadata = metadata_text(j);
  auto batch = batches_->create(key, j["input_file_id"], endpoint, "24h", metadata);
  if (!batch && batch.status().code() == StatusCode::kNotFound) bad("input_file_id", batch.status().message());
  if (!batch && batch.status().code() == StatusCode::kInvalidArgument) bad("endpoint", batch.status().message());
  if (!batch) return store_error_reply("the batch could not be stored", batch.status());
  return json_reply(200, batch_json(*batch));
}

}  // namespace autoglm
