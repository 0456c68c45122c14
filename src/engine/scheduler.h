// The engine's scheduling policy as a plain function over plain data: given the running and
// waiting sequences and the KV cache (behind a small interface), it decides one step: which
// sequences decode, which prefill chunks run within the token budget, which waiting requests
// are admitted, which running ones are preempted to free blocks, and which can never fit.
// The engine applies the decision and runs the batch; tests run the policy against a fake
// block pool with no model loaded.
//
// Policy: running sequences that decode go first, then prefill chunks, each group by
// priority (higher first) and admission order. A decode that needs a block takes it from the
// lowest-priority, latest-admitted running sequence (preempting it, possibly itself); a
// prefill chunk that cannot get blocks waits. Then waiting requests are admitted in order
// (priority, then arrival) while the budget, the running slots and the blocks last.
//
// With a step target and a cost model, the budget is also time: decodes always run, and
// prefill chunks get what the predicted step time leaves, so a long prompt no longer stalls
// every running decode; the first prefill of a step gets at least min_prefill_chunk tokens
// even past the target, so a waiting prompt always progresses. The target is max_step_ms, or
// (auto) step_factor times the predicted decode step of a full batch (max_running sequences at
// the mean depth of the step's decodes): every step may then be at most step_factor times a
// loaded decode step, and a few decoding sequences do not starve the prompts waiting behind
// them. A step without decodes has no one to stall and is planned by tokens only.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/step_cost.h"

namespace autoglm {

using SeqId = uint64_t;  // arrival order: a lower id arrived earlier

struct SeqView {
  SeqId id = 0;
  int32_t priority = 0;
  uint64_t admit_order = 0;  // running: when it was admitted (later: preempted first)
  int64_t n_tokens = 0;      // prompt plus generated tokens
  int64_t n_prompt = 0;
  int64_t n_computed = 0;  // positions whose KV is in the cache
  int64_t pending() const { return n_tokens - n_computed; }
  bool decoding() const { return n_computed >= n_prompt; }
};

// What the scheduler asks of the KV cache; the engine's implementation works on the paged
// pool, the tests' on a counter of blocks.
class KvPlanner {
 public:
  virtual ~KvPlanner() = default;
  // Grows the sequence's cache to hold n_positions; false (nothing taken) when blocks are short.
  virtual bool reserve(SeqId id, int64_t n_positions) = 0;
  virtual int64_t blocks_held(SeqId id) const = 0;
  // Gives every block of the sequence back (full ones stay findable by prefix); its KV is gone.
  virtual void release(SeqId id) = 0;
  // Admission: takes the cached blocks of the longest known prefix; returns the positions they hold.
  virtual int64_t reuse_prefix(SeqId id) = 0;
};

struct SchedulerLimits {
  int64_t max_batch_tokens = 512;
  int64_t max_running = 16;
  double max_step_ms = 0;               // 0: plan by tokens only; < 0: auto (step_factor)
  double step_factor = 3.0;             // auto: the target is this many times a full batch's decode
  const StepCostModel* cost = nullptr;  // needed when max_step_ms != 0
  int64_t min_prefill_chunk = 16;       // tokens a prefill gets per step even past the target
};

struct ScheduledChunk {
  SeqId id = 0;
  int64_t n_tokens = 0;  // tokens to compute from the sequence's n_computed
};

struct ScheduleOutput {
  std::vector<ScheduledChunk> work;  // the batch, in order
  std::vector<SeqId> preempted;      // running -> waiting, in the order they gave way
  std::vector<SeqId> too_long;       // the whole pool cannot hold them: finish as "length"
  std::vector<SeqId> admitted;       // waiting -> running, in order
  StepShape shape;                   // of the work (what the cost model is told after the step)
  double predicted_ms = 0;           // by the cost model, when there is one
  double target_ms = 0;              // the step's time target (0: none)
};

// The waiting order: higher priority first, then earlier arrival (lower id).
bool runs_before(const SeqView& a, const SeqView& b);

// `running` in the engine's order, `waiting` sorted by runs_before.
ScheduleOutput schedule_step(const std::vector<SeqView>& running, const std::vector<SeqView>& waiting,
                             const SchedulerLimits& limits, KvPlanner& kv);

}  // namespace autoglm
