// Batches (OpenAI's /v1/batches) as rows of the jobs database. A batch's requests are jobs
// (JobStore, with its batch_id); the batch row holds what the API shows and, once final, the
// counts and the output and error files.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "server/store/sqlite_db.h"

namespace autoglm {

// OpenAI's states; this server validates at upload and ends cancelling at once, so a batch is
// stored in_progress, cancelling (briefly) or one of the final four.
enum class BatchStatus {
  kValidating,
  kFailed,
  kInProgress,
  kFinalizing,
  kCompleted,
  kExpired,
  kCancelling,
  kCancelled
};
inline constexpr int kBatchStatusCount = 8;

const char* batch_status_name(BatchStatus s);
bool batch_final(BatchStatus s);

struct StoredBatch {
  std::string id;  // "batch_..."
  std::string owner;
  std::string endpoint;
  std::string input_file_id;
  std::string completion_window;  // "24h"
  std::string metadata;           // JSON object text, "" for none
  BatchStatus status = BatchStatus::kInProgress;
  double created_at = 0, in_progress_at = 0, expires_at = 0, finalizing_at = 0, completed_at = 0, failed_at = 0,
         expired_at = 0, cancelling_at = 0, cancelled_at = 0;
  std::string output_file_id, error_file_id;
  int64_t total = 0, completed = 0, failed = 0;  // stored when final; counted from the jobs before
};

class BatchStore {
 public:
  static Result<std::unique_ptr<BatchStore>> open(SqliteDb& db);

  Status add(const StoredBatch& batch);  // inside a caller's transaction too
  std::optional<StoredBatch> get(const std::string& id);
  Result<std::vector<StoredBatch>> list(const std::string& owner, const std::string& after, int64_t limit);
  // The batches not yet final (in_progress or cancelling).
  Result<std::vector<StoredBatch>> open_batches();
  // In progress -> cancelling; false when the batch was not in progress.
  Result<bool> mark_cancelling(const std::string& id, double now);
  // Not final -> `batch`'s final state with its counts, files and times; false when already
  // final (another thread finished it first).
  Result<bool> finish(const StoredBatch& batch);
  std::vector<int64_t> counts();  // by BatchStatus
  // Final batches that ended before `before` are deleted (their files go by their own age); how
  // many.
  Result<int64_t> remove_final_before(double before);

 private:
  explicit BatchStore(SqliteDb& db) : db_(db) {}
  SqliteDb& db_;
};

}  // namespace autoglm
