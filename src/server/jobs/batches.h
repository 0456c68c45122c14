// OpenAI's Batch API over the async jobs: an uploaded JSONL file (checked line by line) becomes
// a batch whose lines are jobs, written in one transaction with the batch and run by the same
// runners at the same low priority. When the last one ends, the output and error files are
// made, the batch marked final and its jobs dropped, again in one transaction: every line is
// answered exactly once, whatever restarts come between. A sweeper expires batches past their
// window, finishes batches a crash left, and applies the retention.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/jobs/async_jobs.h"
#include "server/jobs/batch_store.h"
#include "server/jobs/file_store.h"

namespace autoglm {

nlohmann::ordered_json file_json(const StoredFile& file);
nlohmann::ordered_json batch_json(const StoredBatch& batch);

class Batches {
 public:
  // Opens the file and batch tables beside the jobs, finishes what a previous run left, and
  // starts the sweeper. `jobs` outlives this, and its runners (which call back here) are
  // stopped before this is destroyed.
  static Result<std::unique_ptr<Batches>> start(AsyncJobs& jobs, const JobsConfig& config);
  ~Batches();

  // Files of `api_key`'s owner. An upload is batch input: kInvalidArgument names the line.
  Result<StoredFile> upload(const std::string& api_key, const std::string& filename, const std::string& content);
  std::optional<StoredFile> file(const std::string& id, const std::string& api_key);
  Result<std::string> file_content(const std::string& id, const std::string& api_key);
  Result<std::vector<StoredFile>> files(const std::string& api_key, const std::string& purpose,
                                        const std::string& after, int64_t limit);
  Result<bool> remove_file(const std::string& id, const std::string& api_key);

  // Errors: kNotFound (no such input file of this key), kInvalidArgument (its requests are for
  // another endpoint), kResourceExhausted (storage full), the store's.
  Result<StoredBatch> create(const std::string& api_key, const std::string& input_file_id, const std::string& endpoint,
                             const std::string& completion_window, const std::string& metadata);
  // With the counts of now.
  std::optional<StoredBatch> get(const std::string& id, const std::string& api_key);
  Result<std::vector<StoredBatch>> list(const std::string& api_key, const std::string& after, int64_t limit);
  // The batch after the cancel (nullopt: no such batch of this key).
  Result<std::optional<StoredBatch>> cancel(const std::string& id, const std::string& api_key);

  std::vector<int64_t> counts() { return batches_->counts(); }  // by BatchStatus
  // Requests of unfinished batches by status.
  std::map<JobStatus, int64_t> request_counts() { return jobs_.store().batch_counts(""); }

 private:
  Batches(AsyncJobs& jobs, const JobsConfig& config, std::unique_ptr<FileStore> files,
          std::unique_ptr<BatchStore> batches);
  void job_ended(const Job& job);
  Status finish(const std::string& batch_id, BatchStatus final_status);
  StoredBatch with_counts(StoredBatch batch);
  bool sweep();
  void sweep_soon();
  void sweeper();

  AsyncJobs& jobs_;
  JobsConfig config_;
  std::unique_ptr<FileStore> files_;
  std::unique_ptr<BatchStore> batches_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool retry_soon_ = false;  // a batch's end was refused: sweep again in a second
  std::thread sweeper_;
};

}  // namespace autoglm
