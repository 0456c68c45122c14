// Drafting with the target's own NextN (MTP) block (GLM-4.5/4.6/4.7, DeepSeek-V3): the block
// reads the embedding of the token just produced and the target's last hidden state at the
// position before it, and predicts the token after; further drafts chain it on its own output
// state. Its KV rows (one layer) live in a pool of its own, a row per target position: row i
// is the block's pass over (token i + 1, the target's hidden state at i). So the drafter needs
// the target's hidden rows of every position, which each target pass gives for free
// (observe_target); positions it never saw (a reused prefix) leave the sequence undrafted.
#pragma once

#include <memory>
#include <unordered_map>

#include "engine/draft_pool.h"
#include "engine/speculative.h"
#include "kv/block_pool.h"
#include "kv/paged_sequence.h"
#include "model/runner.h"

namespace autoglm {

class MtpDrafter final : public Drafter {
 public:
  // `target` must have a NextN block on the cpu (check_mtp_layers) and a KV format of
  // kv.kv_type; its sequences share kv.n_blocks blocks of the block's rows.
  MtpDrafter(const Model& target, ThreadPool& pool, const DraftPool& kv, float p_min);

  Status propose(std::span<DraftJob> jobs) override;
  void forget(uint64_t sequence) override { sequences_.erase(sequence); }
  OpProfile* profile() override { return &runner_.profile(); }
  bool wants_target_hidden() const override { return true; }
  void observe_target(uint64_t sequence, int64_t first_pos, const float* rows, int64_t n) override;

 private:
  // What the drafter keeps of a sequence: the block's rows [0, filled) are final; the target's
  // hidden rows of positions filled.. wait for the tokens after them.
  struct Sequence {
    explicit Sequence(BlockPool& pool) : kv(pool) {}
    PagedSequenceKv kv;
    int64_t filled = 0;
    std::vector<float> hidden;  // positions [filled, filled + rows)
    bool lost = false;          // the target ran positions the drafter never saw
  };
  struct Run;  // the positions a job runs in a pass
  // The job's sequence with room for its drafts, or null where it cannot draft.
  Sequence* ready(const DraftJob& job, std::span<DraftJob> jobs);
  // Runs what the block lacks of each job's history; its last row gives the first draft.
  Status catch_up(std::span<DraftJob> jobs, const std::vector<Sequence*>& seqs, std::vector<bool>& drafting);
  // One batch of runs; each run's last token gives its job's next draft and chained state.
  Status run_pass(const std::vector<Run>& runs, std::span<DraftJob> jobs, const std::vector<Sequence*>& seqs,
                  std::vector<bool>& drafting);

  const ModelSpec& spec_;
  ModelSpec block_spec_;  // the target's, with the one layer the block's cache holds
  ModelRunner runner_;
  std::unique_ptr<BlockPool> pool_;
  float p_min_;
  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> sequences_;
  std::vector<std::vector<float>> chained_;  // per job of the call: the block's output state for its last draft
  std::vector<float> logits_, hidden_in_, hidden_out_;
};

}  // namespace autoglm
