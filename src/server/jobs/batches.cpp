#include "server/jobs/batches.h"

#include <chrono>

#include "core/log.h"
#include "core/random_id.h"
#include "server/jobs/batch_input.h"

namespace autoglm {
namespace {

using json = nlohmann::ordered_json;

json time_or_null(double t) {
  return t > 0 ? json(int64_t(t)) : json(nullptr);
}

json text_or_null(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

// One line of a batch's output or error file, in OpenAI's format: the request's answer as its
// synchronous route gave it, or why it never ran.
json output_line(const Job& job, BatchStatus final_status) {
  json line = {{"id", "batch_req_" + job.id.substr(4)}, {"custom_id", job.custom_id}};
  if (job.status == JobStatus::kCompleted || job.status == JobStatus::kFailed) {
    json body = json::parse(job.result, nullptr, false);
    if (body.is_discarded()) body = nullptr;
    line["response"] = {{"status_code", job.http_status}, {"request_id", job.id}, {"body", body}};
    line["error"] = nullptr;
    return line;
  }
  const bool expired = final_status == BatchStatus::kExpired;
  line["response"] = nullptr;
  line["error"] = {{"code", expired ? "batch_expired" : "batch_cancelled"},
                   {"message", expired ? "the batch expired before this request ran"
                                       : "the batch was cancelled before this request ran"}};
  return line;
}

}  // namespace

json file_json(const StoredFile& f) {
  return {{"id", f.id},
          {"object", "file"},
          {"bytes", f.bytes},
          {"created_at", int64_t(f.created_at)},
          {"filename", f.filename},
          {"purpose", f.purpose},
          {"status", "processed"},
          {"status_details", nullptr}};
}

json batch_json(const StoredBatch& b) {
  json metadata = b.metadata.empty() ? json(nullptr) : json::parse(b.metadata, nullptr, false);
  return {{"id", b.id},
          {"object", "batch"},
          {"endpoint", b.endpoint},
          {"errors", nullptr},
          {"input_file_id", b.input_file_id},
          {"completion_window", b.completion_window},
          {"status", batch_status_name(b.status)},
          {"output_file_id", text_or_null(b.output_file_id)},
          {"error_file_id", text_or_null(b.error_file_id)},
          {"created_at", int64_t(b.created_at)},
          {"in_progress_at", time_or_null(b.in_progress_at)},
          {"expires_at", time_or_null(b.expires_at)},
          {"finalizing_at", time_or_null(b.finalizing_at)},
          {"completed_at", time_or_null(b.completed_at)},
          {"failed_at", time_or_null(b.failed_at)},
          {"expired_at", time_or_null(b.expired_at)},
          {"cancelling_at", time_or_null(b.cancelling_at)},
          {"cancelled_at", time_or_null(b.cancelled_at)},
          {"request_counts", {{"total", b.total}, {"completed", b.completed}, {"failed", b.failed}}},
          {"metadata", metadata.is_discarded() ? json(nullptr) : metadata}};
}

Result<std::unique_ptr<Batches>> Batches::start(AsyncJobs& jobs, const JobsConfig& config) {
  AUTOGLM_ASSIGN_OR_RETURN(auto files, FileStore::open(jobs.store().db()));
  AUTOGLM_ASSIGN_OR_RETURN(auto batches, BatchStore::open(jobs.store().db()));
  std::unique_ptr<Batches> b(new Batches(jobs, config, std::move(files), std::move(batches)));
  jobs.set_on_finished([p = b.get()](const Job& job) { p->job_ended(job); });
  b->retry_soon_ = !b->sweep();  // batches whose last request ended just before a stop
  b->sweeper_ = std::thread([p = b.get()] { p->sweeper(); });
  return b;
}

Batches::Batches(AsyncJobs& jobs, const JobsConfig& config, std::unique_ptr<FileStore> files,
                 std::unique_ptr<BatchStore> batches)
    : jobs_(jobs), config_(config), files_(std::move(files)), batches_(std::move(batches)) {}

Batches::~Batches() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  sweeper_.join();
}

Result<StoredFile> Batches::upload(const std::string& api_key, const std::string& filename,
                                   const std::string& content) {
  AUTOGLM_RETURN_IF_ERROR(parse_batch_input(content).status());
  StoredFile f{random_id("file-"), AsyncJobs::owner_of(api_key), "batch",
               filename,           int64_t(content.size()),      unix_seconds()};
  AUTOGLM_RETURN_IF_ERROR(files_->add(f, content));
  return f;
}

std::optional<StoredFile> Batches::file(const std::string& id, const std::string& api_key) {
  auto f = files_->get(id);
  if (!f || f->owner != AsyncJobs::owner_of(api_key)) return std::nullopt;
  return f;
}

Result<std::string> Batches::file_content(const std::string& id, const std::string& api_key) {
  if (!file(id, api_key)) return not_found("no file '" + id + "'");
  return files_->content(id);
}

Result<std::vector<StoredFile>> Batches::files(const std::string& api_key, const std::string& purpose,
                                               const std::string& after, int64_t limit) {
  return files_->list(AsyncJobs::owner_of(api_key), purpose, after, limit);
}

Result<bool> Batches::remove_file(const std::string& id, const std::string& api_key) {
  if (!file(id, api_key)) return false;
  return files_->remove(id);
}

Result<StoredBatch> Batches::create(const std::string& api_key, const std::string& input_file_id,
                                    const std::string& endpoint, const std::string& completion_window,
                                    const std::string& metadata) {
  const auto input = file(input_file_id, api_key);
  if (!input || input->purpose != "batch") return not_found("no batch input file '" + input_file_id + "'");
  AUTOGLM_ASSIGN_OR_RETURN(const std::string content, files_->content(input_file_id));
  AUTOGLM_ASSIGN_OR_RETURN(const std::vector<BatchLine> lines, parse_batch_input(content));
  if (lines.front().url != endpoint)
    return invalid_argument("the requests of " + input_file_id + " are for " + lines.front().url + " (line " +
                            std::to_string(lines.front().line) + "), not the batch's endpoint " + endpoint);
  StoredBatch batch;
  batch.id = random_id("batch_");
  batch.owner = AsyncJobs::owner_of(api_key);
  batch.endpoint = endpoint;
  batch.input_file_id = input_file_id;
  batch.completion_window = completion_window;
  batch.metadata = metadata;
  batch.created_at = batch.in_progress_at = unix_seconds();
  batch.expires_at = batch.created_at + 24 * 3600;
  batch.total = int64_t(lines.size());
  std::vector<std::string> ids;
  AUTOGLM_RETURN_IF_ERROR(jobs_.store().db().transaction([&]() -> Status {
    for (const BatchLine& line : lines) {
      Job job;
      job.id = random_id("job_");
      job.endpoint = endpoint;
      job.body = line.body;
      job.owner = batch.owner;
      job.created_at = batch.created_at;
      job.batch_id = batch.id;
      job.custom_id = line.custom_id;
      AUTOGLM_RETURN_IF_ERROR(jobs_.store().add(job));
      ids.push_back(job.id);
    }
    return batches_->add(batch);
  }));
  jobs_.enqueue(ids);  // after the commit: a crash before this finds them queued at the next start
  return batch;
}

StoredBatch Batches::with_counts(StoredBatch batch) {
  if (batch_final(batch.status)) return batch;
  const auto counts = jobs_.store().batch_counts(batch.id);
  auto count = [&](JobStatus s) { return counts.count(s) ? counts.at(s) : 0; };
  batch.completed = count(JobStatus::kCompleted);
  batch.failed = count(JobStatus::kFailed);
  return batch;
}

std::optional<StoredBatch> Batches::get(const std::string& id, const std::string& api_key) {
  auto batch = batches_->get(id);
  if (!batch || batch->owner != AsyncJobs::owner_of(api_key)) return std::nullopt;
  return with_counts(*batch);
}

Result<std::vector<StoredBatch>> Batches::list(const std::string& api_key, const std::string& after, int64_t limit) {
  AUTOGLM_ASSIGN_OR_RETURN(auto page, batches_->list(AsyncJobs::owner_of(api_key), after, limit));
  for (StoredBatch& b : page) b = with_counts(std::move(b));
  return page;
}

Result<std::optional<StoredBatch>> Batches::cancel(const std::string& id, const std::string& api_key) {
  if (!get(id, api_key)) return std::optional<StoredBatch>();
  AUTOGLM_ASSIGN_OR_RETURN(const bool cancelling, batches_->mark_cancelling(id, unix_seconds()));
  if (cancelling) {
    Status st = jobs_.cancel_batch(id);
    if (st.is_ok()) st = finish(id, BatchStatus::kCancelled);
    if (!st.is_ok()) {  // stored as cancelling: the sweeper ends it, as OpenAI's batches end
      log_line(LogLevel::kWarning, "batch " + id + ": " + st.message() + "; cancelled when the store has room");
      sweep_soon();
    }
  }
  return get(id, api_key);
}

// The runners ended one of a batch's requests: the last one finishes the batch.
void Batches::job_ended(const Job& job) {
  if (job.batch_id.empty()) return;
  const auto counts = jobs_.store().batch_counts(job.batch_id);
  if (counts.count(JobStatus::kQueued) || counts.count(JobStatus::kInProgress)) return;
  const auto batch = batches_->get(job.batch_id);
  if (!batch || batch_final(batch->status)) return;
  const BatchStatus final_status =
      batch->status == BatchStatus::kCancelling ? BatchStatus::kCancelled : BatchStatus::kCompleted;
  if (Status st = finish(job.batch_id, final_status); !st.is_ok()) {
    log_line(LogLevel::kWarning, "batch " + job.batch_id + ": " + st.message() + "; finished when the store has room");
    sweep_soon();
  }
}

// A batch's end was refused (a full store): the sweeper finishes it, trying every second.
void Batches::sweep_soon() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    retry_soon_ = true;
  }
  wake_.notify_all();
}

// Writes the output and error files, marks the batch final and drops its jobs, all at once; a
// batch already final is left as it is (whoever came first finished it).
Status Batches::finish(const std::string& batch_id, BatchStatus final_status) {
  return jobs_.store().db().transaction([&]() -> Status {
    auto batch = batches_->get(batch_id);
    if (!batch || batch_final(batch->status)) return Status::ok();
    AUTOGLM_ASSIGN_OR_RETURN(const std::vector<Job> requests, jobs_.store().batch_jobs(batch_id));
    std::string output, errors;
    batch->completed = batch->failed = 0;
    for (const Job& job : requests) {
      const bool answered = job.status == JobStatus::kCompleted && job.http_status == 200;
      batch->completed += answered;
      batch->failed += job.status == JobStatus::kFailed || (job.status == JobStatus::kCompleted && !answered);
      (answered ? output : errors) +=
          output_line(job, final_status).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    }
    const double now = unix_seconds();
    for (auto [text, id, suffix] :
         {std::tuple{&output, &batch->output_file_id, "output"}, std::tuple{&errors, &batch->error_file_id, "error"}}) {
      if (text->empty()) continue;
      StoredFile f{random_id("file-"),    batch->owner, "batch_output", batch_id + "_" + suffix + ".jsonl",
                   int64_t(text->size()), now};
      AUTOGLM_RETURN_IF_ERROR(files_->add(f, *text));
      *id = f.id;
    }
    batch->status = final_status;
    batch->finalizing_at = now;
    (final_status == BatchStatus::kCompleted ? batch->completed_at
     : final_status == BatchStatus::kExpired ? batch->expired_at
                                             : batch->cancelled_at) = now;
    AUTOGLM_ASSIGN_OR_RETURN(const bool finished, batches_->finish(*batch));
    if (!finished) return Status::ok();
    return jobs_.store().remove_batch(batch_id);
  });
}

// Expires batches past their window, finishes those whose requests all ended (a stop between
// the last one and its batch's end, or an end the store refused), and removes what is past the
// retention. False when a batch could not be ended.
bool Batches::sweep() {
  auto open = batches_->open_batches();
  if (!open) {
    log_line(LogLevel::kWarning, "batches: " + open.status().message());
    return false;
  }
  bool all_ended = true;
  const double now = unix_seconds();
  std::vector<std::string> inputs_in_use;
  for (const StoredBatch& b : *open) {
    inputs_in_use.push_back(b.input_file_id);
    Status st;
    if (b.expires_at <= now) {
      st = jobs_.cancel_batch(b.id);
      if (st.is_ok()) st = finish(b.id, BatchStatus::kExpired);
    } else if (b.status == BatchStatus::kCancelling) {
      st = jobs_.cancel_batch(b.id);
      if (st.is_ok()) st = finish(b.id, BatchStatus::kCancelled);
    } else {
      const auto counts = jobs_.store().batch_counts(b.id);
      if (!counts.count(JobStatus::kQueued) && !counts.count(JobStatus::kInProgress))
        st = finish(b.id, BatchStatus::kCompleted);
    }
    if (!st.is_ok()) log_line(LogLevel::kWarning, "batch " + b.id + ": " + st.message());
    all_ended = all_ended && st.is_ok();
  }
  auto batches_gone = batches_->remove_final_before(now - config_.retention_s);
  auto files_gone = files_->remove_created_before(now - config_.retention_s, inputs_in_use);
  for (const Status& st : {batches_gone.status(), files_gone.status()})
    if (!st.is_ok()) log_line(LogLevel::kWarning, "batches: retention: " + st.message());
  return all_ended;
}

// Every 30 s; every second while a batch's end waits for room in the store.
void Batches::sweeper() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (!retry_soon_) wake_.wait_for(lock, std::chrono::seconds(30), [&] { return stopping_ || retry_soon_; });
    if (retry_soon_) wake_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_; });
    if (stopping_) return;
    retry_soon_ = false;  // a refusal while it sweeps asks again
    lock.unlock();
    const bool all_ended = sweep();
    lock.lock();
    retry_soon_ = retry_soon_ || !all_ended;
  }
}

}  // namespace autoglm
