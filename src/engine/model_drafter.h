// Drafting with a model: a cheaper draft model with its own paged KV cache; or one that writes
// each sequence's own target cache: the target's first layers (early exit), or a draft of the
// target's KV shape (its own weights in a smaller type), which reads the target's rows of the
// history (close to its own) and so has no prompt to catch up on. It proposes the most likely token; the sequences of
// one call draft together, one batched pass per drafted position.
#pragma once

#include <memory>
#include <unordered_map>

#include "engine/speculative.h"
#include "kv/block_pool.h"
#include "kv/paged_sequence.h"
#include "model/runner.h"

namespace autoglm {

class ModelDrafter final : public Drafter {
 public:
  // A draft model whose sequences share a pool of n_blocks blocks of block_size positions
  // (kv_type must have passed kv_format for it). When the pool runs short, the sequences of
  // other calls lose what they cached (they catch up when they draft again).
  ModelDrafter(const Model& draft, ThreadPool& pool, int64_t n_blocks, int64_t block_size, DType kv_type, float p_min);
  // A drafter that writes each job's target cache: the first exit_layer layers of the target
  // (early exit), or (exit_layer 0) a whole draft of the target's KV shape, which reads the
  // target's rows for the history instead of computing its own.
  ModelDrafter(const Model& model, ThreadPool& pool, int32_t exit_layer, float p_min);

  Status propose(std::span<DraftJob> jobs) override;
  void forget(uint64_t sequence) override { cached_.erase(sequence); }
  OpProfile* profile() override { return &runner_.profile(); }

 private:
  // A sequence's rows in the draft model's own pool and the tokens they hold.
  struct Cached {
    explicit Cached(BlockPool& pool) : kv(pool) {}
    PagedSequenceKv kv;
    std::vector<int32_t> tokens;
  };
  struct Run;  // the positions a job runs in a pass
  // The cache a job drafts into, grown for its positions (null: no room, it drafts nothing).
  KvCache* cache_for(const DraftJob& job, std::span<DraftJob> jobs);
  // Runs what each job's cache lacks of its history; its first draft then follows.
  // `drafting` marks the jobs that go on drafting after a pass.
  Status catch_up(std::span<DraftJob> jobs, const std::vector<KvCache*>& caches, std::vector<bool>& drafting);
  // One batch of runs; each run's last token gives its job's next draft.
  Status run_pass(const std::vector<Run>& runs, std::span<DraftJob> jobs, const std::vector<KvCache*>& caches,
                  std::vector<bool>& drafting);

  const ModelSpec& spec_;
  ModelRunner runner_;
  std::unique_ptr<BlockPool> pool_;  // null: drafting in the target's caches
  int32_t exit_layer_ = 0;
  float p_min_;
  std::unordered_map<uint64_t, std::unique_ptr<Cached>> cached_;
  std::vector<float> logits_;
};

// The most likely token of a row of logits, or -1 when its probability is under p_min.
int32_t confident_argmax(const float* row, int64_t n_vocab, float p_min);

}  // namespace autoglm
