// Asynchronous jobs over HTTP: POST /v1/async/{chat/completions, completions, tasks} accept a
// request (202 and the job), GET /v1/jobs[/{id}] and DELETE /v1/jobs/{id}; and the runner's
// side, which answers a job through the synchronous route as a client would.
#include <chrono>
#include <condition_variable>

#include "server/api.h"
#include "server/api/list_page.h"
#include "server/api/openai_request.h"

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

Reply json_reply(int status, const json& body) {
  Reply r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

// The store refused: a 503 naming it (its message names jobs.data_dir and the file). Room on a
// full disk rarely comes back within a second, so a client is told to wait longer then.
Reply store_error_reply(const std::string& what, const Status& status) {
  const bool full = status.code() == StatusCode::kResourceExhausted;
  Reply r = error_reply(
      503, what + (full ? ": the jobs storage is full (jobs.max_bytes or the disk): " : ": ") + status.message(), "",
      "service_unavailable");
  r.headers.emplace_back("Retry-After", full ? "30" : "1");
  return r;
}

// POST /v1/async/...: the synchronous route's body plus `metadata` (an object of at most 16
// string values, as OpenAI's); checked now as far as it can be without running it.
Reply ApiService::submit_job(Endpoint endpoint, const std::string& body, const std::string& api_key) {
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
    if (auto other = resolve(j, target, true)) return *other;
    if (!target.route) {
      GenerationCall call = parse_generation_call(
          endpoint == Endpoint::kChatCompletions ? GenerationKind::kChat : GenerationKind::kCompletion, j, config_);
      call.api_key = api_key;
      prepare_generation(call, *target.model, &target);
    }
  }
  auto job = jobs_->submit(std::string(endpoint_path(endpoint)), j.dump(), api_key, metadata, callback_url);
  if (!job && job.status().code() == StatusCode::kInvalidArgument) bad("callback_url", job.status().message());
  if (!job) return store_error_reply("the job could not be stored", job.status());
  return json_reply(202, job_json(*job, jobs_->callback(job->id)));
}

// GET /v1/jobs/{id}, DELETE /v1/jobs/{id}: only the key that submitted a job sees it.
Reply ApiService::job(const std::string& method, const std::string& id, const std::string& api_key) {
  if (!jobs_) return error_reply(404, "async jobs are off: set jobs.data_dir in the configuration");
  Result<std::optional<Job>> job =
      method == "DELETE" ? jobs_->cancel(id, api_key) : Result<std::optional<Job>>(jobs_->get(id, api_key));
  if (!job) return store_error_reply("the job could not be cancelled", job.status());
  if (!*job) return error_reply(404, "no job '" + id + "'");
  return json_reply(200, job_json(**job, jobs_->callback((*job)->id)));
}

// GET /v1/jobs?status=&limit=&after=: newest first, paged as OpenAI's lists are.
Reply ApiService::jobs(const std::string& target, const std::string& api_key) {
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
Reply ApiService::job_reply(const Job& job, const std::string& api_key) {
  const std::optional<Endpoint> endpoint = endpoint_from_path("POST", job.endpoint);
  if (endpoint == Endpoint::kTasks) return run_task(job.body, api_key);
  if (endpoint != Endpoint::kChatCompletions && endpoint != Endpoint::kCompletions)
    return error_reply(404, "a job cannot run on " + job.endpoint + " (chat/completions, completions or tasks)");
  json body = parse_body(job.body, config_.runtime.limits);
  if (!body.contains("priority")) body["priority"] = config_.jobs.priority;
  const GenerationKind kind =
      endpoint == Endpoint::kChatCompletions ? GenerationKind::kChat : GenerationKind::kCompletion;
  GenerationCall call = parse_generation_call(kind, body, config_);
  call.api_key = api_key;
  return generate(call);
}

// A job through its synchronous route, as a non-streamed request at the jobs' priority; waits
// for the whole reply. `run` is armed to cancel the generation.
std::pair<int, std::string> ApiService::run_job(const Job& job, const std::string& api_key, JobRun& run) {
  const auto interrupted = [&] { return stopping_ || draining_; };
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
void ApiService::jobs_metrics(std::string& out) {
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

}  // namespace autoglm
