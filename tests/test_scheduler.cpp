// The scheduling policy with no model: a fake block pool stands in for the KV cache, and
// each test reads the plain ScheduleOutput. Priority order, FCFS within a class, admission
// limits, preemption victims, the chunk budget, and sequences the pool can never hold.
#include <gtest/gtest.h>

#include <map>

#include "engine/scheduler.h"

namespace autoglm {
namespace {

class FakePool : public KvPlanner {
 public:
  FakePool(int64_t blocks, int64_t block_size) : free_(blocks), block_size_(block_size) {}

  bool reserve(SeqId id, int64_t n_positions) override {
    const int64_t need = (n_positions + block_size_ - 1) / block_size_ - held_[id];
    if (need > free_) return false;
    if (need > 0) {
      free_ -= need;
      held_[id] += need;
    }
    return true;
  }
  int64_t blocks_held(SeqId id) const override {
    auto it = held_.find(id);
    return it == held_.end() ? 0 : it->second;
  }
  void release(SeqId id) override {
    free_ += held_[id];
    held_[id] = 0;
    ++releases_[id];
  }
  int64_t reuse_prefix(SeqId id) override {
    const int64_t blocks = cached_[id];
    free_ -= blocks;
    held_[id] += blocks;
    return blocks * block_size_;
  }

  void hold(SeqId id, int64_t blocks) {
    free_ -= blocks;
    held_[id] += blocks;
  }
  void cache_prefix(SeqId id, int64_t blocks) { cached_[id] = blocks; }
  int64_t free_blocks() const { return free_; }
  int releases(SeqId id) { return releases_[id]; }

 private:
  int64_t free_, block_size_;
  std::map<SeqId, int64_t> held_, cached_;
  std::map<SeqId, int> releases_;
};

SeqView decoding(SeqId id, int32_t priority, uint64_t admit_order, int64_t n_tokens = 20) {
  SeqView v;
  v.id = id;
  v.priority = priority;
  v.admit_order = admit_order;
  v.n_prompt = n_tokens - 1;
  v.n_tokens = n_tokens;
  v.n_computed = n_tokens - 1;  // the last sampled token is pending
  return v;
}

SeqView prompt(SeqId id, int32_t priority, int64_t n_tokens, uint64_t admit_order = 0, int64_t n_computed = 0) {
  SeqView v;
  v.id = id;
  v.priority = priority;
  v.admit_order = admit_order;
  v.n_prompt = v.n_tokens = n_tokens;
  v.n_computed = n_computed;
  return v;
}

std::vector<std::pair<SeqId, int64_t>> work_of(const ScheduleOutput& out) {
  std::vector<std::pair<SeqId, int64_t>> w;
  for (const auto& c : out.work) w.emplace_back(c.id, c.n_tokens);
  return w;
}

using Work = std::vector<std::pair<SeqId, int64_t>>;

TEST(Scheduler, DecodesFirstByPriorityThenPrefillChunksWithinTheBudget) {
  FakePool pool(100, 16);
  pool.hold(1, 2);
  pool.hold(2, 2);
  pool.hold(3, 2);
  const std::vector<SeqView> running = {prompt(1, 0, 100, 0, 16), decoding(2, 0, 1), decoding(3, 5, 2)};
  const auto out = schedule_step(running, {}, {50, 16}, pool);
  EXPECT_EQ(work_of(out), (Work{{3, 1}, {2, 1}, {1, 48}}));  // 48 of the prompt's remaining 84
  EXPECT_TRUE(out.preempted.empty());
  EXPECT_TRUE(out.admitted.empty());
}

TEST(Scheduler, WaitingRequestsAreAdmittedInOrderWhileSlotsBudgetAndBlocksLast) {
  FakePool pool(100, 16);
  const std::vector<SeqView> waiting = {prompt(7, 10, 10), prompt(3, 0, 10), prompt(4, 0, 10), prompt(5, 0, 10)};
  // Slots: two running already, room for two more.
  pool.hold(1, 2);
  pool.hold(2, 2);
  auto out = schedule_step({decoding(1, 0, 0), decoding(2, 0, 1)}, waiting, {512, 4}, pool);
  EXPECT_EQ(out.admitted, (std::vector<SeqId>{7, 3}));
  // Budget: 2 decodes + 10 + 5 of the next prompt.
  FakePool pool2(100, 16);
  pool2.hold(1, 2);
  pool2.hold(2, 2);
  out = schedule_step({decoding(1, 0, 0), decoding(2, 0, 1)}, waiting, {17, 16}, pool2);
  EXPECT_EQ(work_of(out), (Work{{1, 1}, {2, 1}, {7, 10}, {3, 5}}));
  EXPECT_EQ(out.admitted, (std::vector<SeqId>{7, 3}));
  // Blocks: one free block admits only the first prompt; the next one's blocks go back.
  FakePool pool3(1, 16);
  out = schedule_step({}, waiting, {512, 16}, pool3);
  EXPECT_EQ(out.admitted, (std::vector<SeqId>{7}));
  EXPECT_EQ(pool3.releases(3), 1);
}

TEST(Scheduler, AdmissionReusesTheCachedPrefix) {
  FakePool pool(100, 16);
  pool.cache_prefix(9, 2);  // 32 of its 40 tokens are cached
  const auto out = schedule_step({}, {prompt(9, 0, 40)}, {512, 16}, pool);
  EXPECT_EQ(work_of(out), (Work{{9, 8}}));
}

TEST(Scheduler, ADecodeShortOfBlocksPreemptsTheLowestPriorityLatestAdmitted) {
  FakePool pool(6, 16);
  // Three running sequences with two blocks each; sequence 1 needs a third block for position 32.
  pool.hold(1, 2);
  pool.hold(2, 2);
  pool.hold(3, 2);
  const std::vector<SeqView> running = {decoding(1, 5, 0, 33), decoding(2, 0, 1, 20), decoding(3, 0, 2, 20)};
  const auto out = schedule_step(running, {}, {512, 16}, pool);
  // Among the lowest priority (0), the latest admitted (3) gives way.
  EXPECT_EQ(out.preempted, (std::vector<SeqId>{3}));
  EXPECT_EQ(work_of(out), (Work{{1, 1}, {2, 1}}));
  EXPECT_EQ(pool.blocks_held(3), 0);
}

TEST(Scheduler, APreemptedSequenceWaitsAheadOfLaterArrivalsOfItsPriority) {
  FakePool pool(4, 16);
  pool.hold(1, 2);
  pool.hold(2, 2);
  // Sequence 2 is preempted for sequence 1; waiting 5 (same priority, later) stays behind it,
  // and neither fits this step.
  const auto out = schedule_step({decoding(1, 1, 0, 33), decoding(2, 0, 1, 20)}, {prompt(5, 0, 40)}, {512, 16}, pool);
  EXPECT_EQ(out.preempted, (std::vector<SeqId>{2}));
  EXPECT_TRUE(out.admitted.empty());
  EXPECT_EQ(pool.releases(2), 2);  // preempted, then its re-admission found no room
}

TEST(Scheduler, WhenNoOtherSequenceHoldsBlocksTheOneThatCannotFitFinishes) {
  FakePool pool(2, 16);
  pool.hold(1, 2);
  const auto out = schedule_step({decoding(1, 0, 0, 33)}, {}, {512, 16}, pool);
  EXPECT_EQ(out.too_long, (std::vector<SeqId>{1}));
  EXPECT_TRUE(out.work.empty());
  EXPECT_EQ(pool.free_blocks(), 2);
}

TEST(Scheduler, APrefillChunkShortOfBlocksWaitsWithoutPreempting) {
  FakePool pool(3, 16);
  pool.hold(1, 2);
  pool.hold(2, 1);
  const std::vector<SeqView> running = {decoding(1, 0, 0, 20), prompt(2, 9, 100, 1, 16)};
  const auto out = schedule_step(running, {}, {512, 16}, pool);
  EXPECT_EQ(work_of(out), (Work{{1, 1}}));
  EXPECT_TRUE(out.preempted.empty());
}

TEST(Scheduler, ALongPromptRunsInChunksOfTheBudget) {
  FakePool pool(100, 16);
  SeqView p = prompt(1, 0, 300);
  auto out = schedule_step({}, {p}, {128, 16}, pool);
  EXPECT_EQ(work_of(out), (Work{{1, 128}}));
  p.n_computed = 128;
  out = schedule_step({p}, {}, {128, 16}, pool);
  EXPECT_EQ(work_of(out), (Work{{1, 128}}));
  p.n_computed = 256;
  out = schedule_step({p}, {}, {128, 16}, pool);
  EXPECT_EQ(work_of(out), (Work{{1, 44}}));
}

}  // namespace
}  // namespace autoglm

namespace autoglm {
namespace {

// A fake cost model: 1 ms per token, 0.01 ms per attended position, 2 ms per step.
const StepCostModel kCost(2.0, 1.0, 0.01);

SchedulerLimits timed(double max_step_ms, int64_t max_batch_tokens = 512) {
  SchedulerLimits l{max_batch_tokens, 16};
  l.max_step_ms = max_step_ms;
  l.cost = &kCost;
  l.min_prefill_chunk = 4;
  return l;
}

// Sequences 1..n decoding at n_tokens, holding their blocks in `pool`.
std::vector<SeqView> decoding_set(FakePool& pool, SeqId n, int64_t n_tokens) {
  std::vector<SeqView> running;
  for (SeqId id = 1; id <= n; ++id) {
    running.push_back(decoding(id, 0, id, n_tokens));
    pool.hold(id, (n_tokens + 15) / 16);
  }
  return running;
}

// A long prompt arrives while 4 sequences decode: the step stays within the target and the
// prompt gets what the decodes leave; run to completion, every step stays within it.
TEST(SchedulerTimed, StepsStayWithinTheTargetWhileALongPromptIsAdmitted) {
  FakePool pool(1000, 16);
  std::vector<SeqView> running = decoding_set(pool, 4, 200);
  SeqView waiting = prompt(9, 0, 600);
  const auto first = schedule_step(running, {waiting}, timed(40), pool);
  ASSERT_EQ(first.admitted, std::vector<SeqId>{9});
  EXPECT_LE(first.predicted_ms, 40.0);
  EXPECT_GT(first.work.back().n_tokens, 10);  // the prompt got the rest of the step
  EXPECT_NEAR(kCost.predict_ms(first.shape), first.predicted_ms, 1e-9);
  // Later steps: the prompt runs in chunks, each step within the target, until it is done.
  waiting.n_computed = first.work.back().n_tokens;
  running.push_back(waiting);
  running.back().admit_order = 5;
  int steps = 1;
  while (running.back().n_computed < running.back().n_prompt) {
    const auto out = schedule_step(running, {}, timed(40), pool);
    EXPECT_LE(out.predicted_ms, 40.0) << "step " << steps;
    ASSERT_EQ(out.work.size(), 5u);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(out.work[i].n_tokens, 1) << "decodes always run";
    running.back().n_computed += out.work.back().n_tokens;
    ASSERT_LT(++steps, 200);
  }
  // Planning by tokens alone would have put 508 prompt tokens in the first step (~520 ms).
  const auto untimed = schedule_step(running, {prompt(10, 0, 600)}, {512, 16}, pool);
  EXPECT_GT(kCost.predict_ms(untimed.shape), 100.0);
}

// When the decodes alone fill the target, a waiting prompt still progresses by the minimum
// chunk each step (no starvation), and priorities still order the work.
TEST(SchedulerTimed, AWaitingPromptAlwaysProgressesAndPrioritiesOrderWork) {
  FakePool pool(1000, 16);
  std::vector<SeqView> running;
  for (SeqId id = 1; id <= 12; ++id) {
    running.push_back(decoding(id, id == 12 ? 5 : 0, id, 200));
    pool.hold(id, 13);
  }
  const auto out =
      schedule_step(running, {prompt(21, 9, 300), prompt(20, 0, 300)}, timed(10), pool);  // runs_before order
  EXPECT_EQ(out.work.front().id, 12u);              // the high-priority decode first
  ASSERT_EQ(out.admitted, std::vector<SeqId>{21});  // the higher-priority prompt, with the minimum chunk
  EXPECT_EQ(out.work.back().n_tokens, 4);
  EXPECT_GT(out.predicted_ms, 10.0);  // past the target: progress wins over the target
}

// Auto: the target is three times the predicted decode step of a full batch (max_running at
// the decodes' mean depth), whatever the number of decodes; without decodes, tokens only.
TEST(SchedulerTimed, AutoTargetIsAShareOfAFullBatchDecode) {
  FakePool pool(1000, 16);
  const std::vector<SeqView> running = decoding_set(pool, 4, 100);
  const auto out = schedule_step(running, {prompt(9, 0, 400)}, timed(-1), pool);
  const double full_batch = kCost.predict_ms({16, 16 * 100});  // 2 + 16 + 16 = 34 ms
  EXPECT_NEAR(out.target_ms, 3 * full_batch, 1e-9);
  EXPECT_LE(out.predicted_ms, out.target_ms);
  // The prompt gets what 4 decodes leave of it: far more than three times their own time would.
  const double four_decodes = kCost.predict_ms({4, 4 * 100});  // 10 ms
  EXPECT_GT(kCost.predict_ms(out.shape), 3 * four_decodes);
  EXPECT_GT(out.work.back().n_tokens, 60);  // three times the 4 decodes would have left it ~18
  // One decode and sixteen: the same target at the same depth.
  FakePool one_pool(1000, 16), full_pool(1000, 16);
  const auto one = schedule_step(decoding_set(one_pool, 1, 100), {prompt(9, 0, 400)}, timed(-1), one_pool);
  const auto full = schedule_step(decoding_set(full_pool, 16, 100), {prompt(30, 0, 400)}, timed(-1, 512), full_pool);
  EXPECT_NEAR(one.target_ms, out.target_ms, 1e-9);
  EXPECT_EQ(full.target_ms, 0.0) << "no running slot left: the prompt waits and nothing is timed";
  FakePool idle(1000, 16);
  const auto alone = schedule_step({}, {prompt(9, 0, 400)}, timed(-1), idle);
  EXPECT_EQ(alone.work.back().n_tokens, 400);  // nobody to stall: the whole budget
  EXPECT_EQ(alone.target_ms, 0);
}

// The online fit recovers a model's coefficients from measured steps.
TEST(StepCost, OnlineFitRecoversTheCoefficients) {
  StepCostModel model;
  const StepCostModel truth(3.0, 0.5, 0.002);
  for (int i = 0; i < 200; ++i) {
    const int64_t n = 1 + (i * 37) % 200, computed = (i * 101) % 3000;
    const StepShape s{n, attended_positions(computed, n)};
    model.observe(s, truth.predict_ms(s));
  }
  EXPECT_NEAR(model.base_ms(), 3.0, 0.05);
  EXPECT_NEAR(model.per_token_ms(), 0.5, 0.005);
  EXPECT_NEAR(model.per_position_ms(), 0.002, 0.0002);
}

}  // namespace
}  // namespace autoglm
