// Asynchronous jobs over HTTP: POST /v1/async/{chat/completions, completions, tasks} accept a
// request (202 and the job), GET /v1/jobs[/{id}] and DELETE /v1/jobs/{id}; and the runner's
// side, which answers a job through the synchronous route as a client would.
#include <chrono>
#include <condition_variable>

#include "server/api.h"
#include "server/openai_request.h"

namespace autoglm {
namespace {

Reply json_reply(int status, const json& body) {
  Reply r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

}  // namespace

// POST /v1/async/...: the synchronous route's body plus `metadata` (an object of at most 16
// string values, as OpenAI's); checked now as far as it can be without running it.
Reply ApiService::submit_job(const std::string& endpoint, const std::string& body, const std::string& api_key) {
  if (!jobs_) return error_reply(404, "async jobs are off: set jobs.data_dir in the configuration");
  json j = parse_body(body, config_.limits);
  std::string callback_url;
  if (j.contains("callback_url") && !j["callback_url"].is_null()) {
    if (!j["callback_url"].is_string()) bad("callback_url", "'callback_url' must be a string");
    callback_url = j["callback_url"];
  }
  j.erase("callback_url");
  std::string metadata;
  if (j.contains("metadata") && !j["metadata"].is_null()) {
    const json& m = j["metadata"];
    if (!m.is_object() || m.size() > 16) bad("metadata", "'metadata' must be an object of at most 16 keys");
    for (const auto& [k, v] : m.items())
      if (!v.is_string() || v.get<std::string>().size() > 512 || k.size() > 64)
        bad("metadata", "'metadata' values must be strings (keys up to 64, values up to 512 bytes)");
    metadata = m.dump();
  }
  j.erase("metadata");
  if (j.value("stream", false)) bad("stream", "an async job is not streamed: its result is stored whole");
  if (endpoint == "/v1/tasks") {
    if (!j.contains("input") || !j["input"].is_string() || j["input"].get<std::string>().empty())
      bad("input", "'input' must be a non-empty string");
  } else {
    Target target;
    if (auto other = resolve(j, target, true)) return *other;
    if (!target.route) prepare_generation(j, endpoint == "/v1/chat/completions", api_key, *target.model);
  }
  auto job = jobs_->submit(endpoint, j.dump(), api_key, metadata, callback_url);
  if (!job && job.status().code() == StatusCode::kInvalidArgument) bad("callback_url", job.status().message());
  if (!job)
    return error_reply(503, "the job could not be stored: " + job.status().message(), "", "service_unavailable");
  return json_reply(202, job_json(*job, jobs_->callback(job->id)));
}

// GET /v1/jobs/{id}, DELETE /v1/jobs/{id}: only the key that submitted a job sees it.
Reply ApiService::job(const std::string& method, const std::string& id, const std::string& api_key) {
  if (!jobs_) return error_reply(404, "async jobs are off: set jobs.data_dir in the configuration");
  auto job = method == "DELETE" ? jobs_->cancel(id, api_key) : jobs_->get(id, api_key);
  if (!job) return error_reply(404, "no job '" + id + "'");
  return json_reply(200, job_json(*job, jobs_->callback(job->id)));
}

// GET /v1/jobs?status=&limit=&after=: newest first, paged as OpenAI's lists are.
Reply ApiService::jobs(const std::string& target, const std::string& api_key) {
  if (!jobs_) return error_reply(404, "async jobs are off: set jobs.data_dir in the configuration");
  std::optional<JobStatus> status;
  int64_t limit = 20;
  std::string after;
  const size_t q = target.find('?');
  for (size_t start = q == std::string::npos ? target.size() : q + 1; start < target.size();) {
    const size_t end = std::min(target.find('&', start), target.size());
    const std::string pair = target.substr(start, end - start);
    const size_t eq = pair.find('=');
    const std::string key = pair.substr(0, eq), value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    if (key == "status") {
      status = job_status_from_name(value);
      if (!status) bad("status", "'status' must be queued, in_progress, completed, failed or cancelled");
    } else if (key == "limit") {
      char* rest = nullptr;
      limit = std::strtoll(value.c_str(), &rest, 10);
      if (value.empty() || *rest || limit < 1 || limit > 100) bad("limit", "'limit' must be between 1 and 100");
    } else if (key == "after") {
      after = value;
    }
    start = end + 1;
  }
  auto page = jobs_->list(api_key, status, after, limit + 1);
  if (!page) return error_reply(503, page.status().message(), "", "service_unavailable");
  const bool more = int64_t(page->size()) > limit;
  if (more) page->pop_back();
  json data = json::array();
  for (const Job& job : *page) data.push_back(job_json(job, jobs_->callback(job.id)));
  return json_reply(200, {{"object", "list"},
                          {"data", data},
                          {"first_id", page->empty() ? json(nullptr) : json(page->front().id)},
                          {"last_id", page->empty() ? json(nullptr) : json(page->back().id)},
                          {"has_more", more}});
}

// A job through its synchronous route, as a non-streamed request at the jobs' priority; waits
// for the whole reply. `run` is armed to cancel the generation.
std::pair<int, std::string> ApiService::run_job(const Job& job, const std::string& api_key, JobRun& run) {
  json body = json::parse(job.body, nullptr, false);
  if (job.endpoint != "/v1/tasks" && body.is_object() && !body.contains("priority"))
    body["priority"] = config_.jobs.priority;
  HttpRequest req;
  req.method = "POST";
  req.target = job.endpoint;
  req.body = body.dump();
  if (!api_key.empty()) req.authorization = "Bearer " + api_key;
  Reply reply = handle_admitted(req);
  if (!reply.stream) return {reply.status, reply.body};
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
        return {chunk.status, chunk.bytes};
      }
    }
    std::unique_lock<std::mutex> lock(signal->mutex);
    signal->arrived.wait_for(lock, std::chrono::milliseconds(50));
  }
}

}  // namespace autoglm
