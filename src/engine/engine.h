// Continuous batching: one thread runs step after step; each step is one ragged
// batch of every running sequence's next token plus prefill chunks, within a token
// budget, over the paged KV cache with prefix reuse and preemption.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "autoglm/engine.h"
#include "autoglm/limits.h"
#include "core/thread_pool.h"
#include "engine/constrained.h"
#include "engine/embeddings.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/speculative.h"
#include "engine/step_cost.h"
#include "kv/block_pool.h"
#include "model/model.h"
#include "model/runner.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {

struct EngineConfig {
  int64_t n_ctx = 4096;            // most tokens (prompt + output) of one sequence
  int64_t kv_blocks = 256;         // blocks in the pool
  int64_t block_size = 16;         // tokens per block
  int64_t max_batch_tokens = 512;  // tokens per step
  int64_t max_running = 16;        // sequences in the running set
  int64_t max_queued = 256;        // waiting requests before submit says "busy"
  bool prefix_cache = true;
  KvTierOptions kv_tiers;      // where evicted prefix blocks go (its format_key is the engine's)
  DType kv_type = DType::F16;  // must have passed kv_format for the model
  bool profile = false;        // per-op times in op_profile()
  // Step time target (scheduler.h): 0 off, < 0 auto (3x the step's predicted decode time).
  double max_step_ms = 0;
  RequestLimits limits;  // checked on every submit
  // Speculative decoding of the running sequences (kDraft needs the engine's draft model).
  SpecConfig spec;
};

// Milliseconds on the steady clock (EngineStats::step_began_ms).
inline int64_t steady_milliseconds() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

// Counters and gauges, read from any thread.
// The LoRA adapters of the running and of the waiting requests (names, sorted and
// comma-joined; "" none) and when either last changed (unix seconds).
struct LoraActivity {
  std::string running, waiting;
  double changed_at = 0;
};

struct EngineStats {
  std::atomic<int64_t> prompt_tokens{0};
  std::atomic<int64_t> generated_tokens{0};
  std::atomic<int64_t> prefix_hit_tokens{0};
  std::atomic<int64_t> prefix_queried_tokens{0};
  std::atomic<int64_t> preemptions{0};
  std::atomic<int64_t> steps{0};
  std::atomic<int64_t> running{0};
  std::atomic<int64_t> waiting{0};
  std::atomic<int64_t> kv_blocks_used{0};
  std::atomic<int64_t> kv_blocks_total{0};
  // Liveness: the engine thread is in its loop, and when its current step began (steady clock,
  // milliseconds; 0 between steps). What /health reports.
  std::atomic<bool> loop_alive{false};
  std::atomic<int64_t> step_began_ms{0};
  // The step time target in use (microseconds; 0: planning by tokens only), and the prefill
  // chunks the scheduler chose: counts by upper bound 8, 16, ..., 512, more; their sum.
  std::atomic<int64_t> step_target_us{0};
  static constexpr int kChunkBuckets = 8;
  std::array<std::atomic<int64_t>, kChunkBuckets> prefill_chunks{};
  std::atomic<int64_t> prefill_chunk_tokens{0};
  // Speculative decoding: tokens drafted and accepted, verifying passes (one per sequence and
  // step that had drafts), and finished requests that drafted by acceptance rate, in tenths.
  std::atomic<int64_t> spec_drafted{0};
  std::atomic<int64_t> spec_accepted{0};
  std::atomic<int64_t> spec_passes{0};
  static constexpr int kAcceptanceBuckets = 10;
  std::array<std::atomic<int64_t>, kAcceptanceBuckets> spec_acceptance{};
  std::atomic<int64_t> spec_acceptance_milli{0};  // their rates' sum, in thousandths
  // Finished requests by finish reason.
  std::array<std::atomic<int64_t>, kFinishReasonCount> finished{};
  int64_t finished_with(FinishReason r) const { return finished[size_t(r)].load(); }

  LoraActivity lora_activity() const {
    std::lock_guard<std::mutex> lock(lora_mutex);
    return lora;
  }
  void set_lora_activity(std::string running, std::string waiting);  // keeps changed_at when the same
  mutable std::mutex lora_mutex;
  LoraActivity lora;
};

struct Sequence;

class Engine {
 public:
  // config.spec must pass validate_spec_config; with SpecMethod::kDraft, `draft` (which must
  // outlive the engine) has the target's vocabulary and a KV format for config.kv_type.
  Engine(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool, EngineConfig config,
         const Model* draft = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; errors: bad parameters, prompt over the context, queue full (kResourceExhausted).
  Result<std::shared_ptr<StreamHandle>> submit(GenerationRequest request);
  // Embeddings of the job's inputs, computed on the engine thread between generation steps
  // (see engine/embeddings.h). Errors: an input empty, past the context, or a bad token id.
  std::future<Result<std::vector<std::vector<float>>>> embed(EmbeddingJob job);

  const EngineStats& stats() const { return stats_; }
  // Requests submitted that the loop has yet to take (stats().waiting counts them once it has).
  int64_t submitted_not_taken() const { return n_submitted_.load(); }
  KvTierStats kv_tier_stats() const { return tiers_ ? tiers_->stats() : KvTierStats{}; }
  const EngineConfig& config() const { return config_; }
  const OpProfile& op_profile() const { return runner_.profile(); }
  // The drafter's own passes (a draft model or MTP block), or null.
  const OpProfile* draft_profile() const;

 private:
  void loop();
  void save_cache_to_disk();
  bool step();
  void take_submissions();
  void drop_cancelled_and_expired();
  class Planner;
  int64_t reuse_prefix(Sequence& seq);
  void release_kv(Sequence& seq);
  void apply(const ScheduleOutput& plan, Planner& planner);
  void finish(Sequence& seq, FinishReason reason, const std::string& error = "");
  void fail_running(const std::string& error);
  void after_forward(Sequence& seq, int64_t n_computed_now, const float* logits);
  // Speculation: drafts for the running decodes before a step is planned; after it, the
  // verification of one sequence's rows; drafts that did not run are dropped.
  void propose_drafts();
  void show_drafter(const ScheduleOutput& plan, Planner& planner);
  bool reserve_for_drafts(Sequence& seq, int64_t n);
  void after_verifying(Sequence& seq, int64_t n_run, const float* rows);
  // Samples the next token from a row of logits and streams it; false once the sequence finished.
  bool emit_next_token(Sequence& seq, const float* logits);
  uint64_t block_hash(const Sequence& seq, uint64_t parent, int64_t block) const;
  Status check_images(const GenerationRequest& request) const;
  void add_image_inputs(const ScheduleOutput& plan, Planner& planner, Batch& batch) const;
  void publish_full_blocks(Sequence& seq);
  void release_out_of_window(Sequence& seq);
  void update_gauges();
  bool lora_listed_ = false;  // the last update_gauges saw adapters in use

  const Model& model_;
  const Tokenizer& tokenizer_;
  VocabularyTrie trie_;  // for requests with a grammar
  EngineConfig config_;
  std::shared_ptr<KvTiers> tiers_;  // before blocks_: the pool puts into it while it lives (shared per disk folder)
  BlockPool blocks_;
  ModelRunner runner_;
  TurnQueue::Seat turn_seat_;  // in the pool's turns: one step at a time among the engines that share it
  EngineStats stats_;

  std::mutex submit_mutex_;
  std::condition_variable submit_ready_;
  std::vector<std::unique_ptr<Sequence>> submitted_;
  struct PendingEmbedding {
    EmbeddingJob job;
    std::promise<Result<std::vector<std::vector<float>>>> done;
  };
  std::deque<PendingEmbedding> embeddings_;  // under submit_mutex_
  void run_one_embedding();
  // A prompt's or an embedding input's tokens: present and inside the vocabulary (errors start with `where`).
  Status check_token_ids(const std::vector<int32_t>& tokens, const std::string& where) const;
  void calibrate_step_cost();
  void record_prefill_chunk(int64_t n);
  StepCostModel step_cost_;           // engine thread only
  std::unique_ptr<Drafter> drafter_;  // null: no speculation
  double max_step_ms_ = 0;
  int64_t queued_ = 0;                   // submitted + waiting, under submit_mutex_
  std::atomic<int64_t> n_submitted_{0};  // submitted_.size(), read by stats without the lock
  bool stopping_ = false;

  // Engine thread only.
  std::list<std::unique_ptr<Sequence>> waiting_;  // by priority, then arrival
  std::list<std::unique_ptr<Sequence>> running_;
  uint64_t next_id_ = 0;
  uint64_t admissions_ = 0;
  std::vector<float> logits_;
  std::vector<float> hidden_;  // the step's hidden rows, for a drafter that reads them
  std::vector<float> sample_row_;
  std::thread thread_;
};

}  // namespace autoglm
