#include "engine/scheduler.h"

#include <cmath>
#include <optional>

#include <algorithm>
#include <list>

namespace autoglm {
namespace {

struct Planning {
  std::vector<SeqView> running;  // still running (preempted ones leave)
  std::list<SeqView> waiting;
  std::vector<SeqId> finished;  // too long: stay counted in the running set this step
  KvPlanner& kv;
  ScheduleOutput out;

  bool is_running(SeqId id) const {
    return std::any_of(running.begin(), running.end(), [&](const SeqView& s) { return s.id == id; });
  }

  void preempt(std::vector<SeqView>::iterator victim) {
    kv.release(victim->id);
    SeqView v = *victim;
    v.n_computed = 0;
    running.erase(victim);
    out.preempted.push_back(v.id);
    auto at = std::find_if(waiting.begin(), waiting.end(), [&](const SeqView& w) { return runs_before(v, w); });
    waiting.insert(at, v);
  }

  // Grows `seq`'s cache to n_positions, preempting lower-priority, later-admitted sequences.
  // False if seq itself had to give way, or can never fit.
  bool make_room(const SeqView& seq, int64_t n_positions) {
    while (!kv.reserve(seq.id, n_positions)) {
      const bool others_hold_blocks = std::any_of(
          running.begin(), running.end(), [&](const SeqView& r) { return r.id != seq.id && kv.blocks_held(r.id) > 0; });
      if (!others_hold_blocks) {  // the whole pool cannot hold this sequence
        kv.release(seq.id);
        out.too_long.push_back(seq.id);
        finished.push_back(seq.id);
        return false;
      }
      auto victim = running.end();
      for (auto it = running.begin(); it != running.end(); ++it) {
        if (kv.blocks_held(it->id) == 0) continue;
        if (victim == running.end() || it->priority < victim->priority ||
            (it->priority == victim->priority && it->admit_order > victim->admit_order))
          victim = it;
      }
      if (victim == running.end()) return false;
      const bool self = victim->id == seq.id;
      preempt(victim);
      if (self) return false;
    }
    return true;
  }
};

}  // namespace

bool runs_before(const SeqView& a, const SeqView& b) {
  return a.priority != b.priority ? a.priority > b.priority : a.id < b.id;
}

namespace {

// How many of `wanted` prefill tokens (after `computed` positions) fit in the step.
int64_t prefill_tokens(int64_t wanted, int64_t computed, double remaining_ms, bool first_prefill,
                       const SchedulerLimits& limits) {
  if (limits.max_step_ms == 0 || !limits.cost || wanted <= 0 || std::isinf(remaining_ms)) return wanted;
  const StepCostModel& c = *limits.cost;
  auto cost = [&](int64_t n) {
    return c.per_token_ms() * double(n) + c.per_position_ms() * double(attended_positions(computed, n));
  };
  int64_t lo = 0, hi = wanted;  // the largest n with cost(n) <= remaining_ms
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (cost(mid) <= remaining_ms)
      lo = mid;
    else
      hi = mid - 1;
  }
  if (lo == 0 && first_prefill) lo = std::min(wanted, limits.min_prefill_chunk);  // progress, always
  return lo;
}

// Auto: the predicted decode step of a full batch (max_running sequences) at the mean depth of
// the step's decodes (`decodes`: their shape). A fixed share of the step, whatever the number of
// decodes, so that a few running sequences do not starve the prompts waiting behind them.
double full_batch_decode_ms(const StepShape& decodes, const SchedulerLimits& limits) {
  const double depth = decodes.tokens > 0 ? double(decodes.attended) / double(decodes.tokens) : 0;
  const int64_t n = std::max(limits.max_running, decodes.tokens);
  return limits.cost->predict_ms({n, int64_t(depth * double(n))});
}

}  // namespace

ScheduleOutput schedule_step(const std::vector<SeqView>& running, const std::vector<SeqView>& waiting,
                             const SchedulerLimits& limits, KvPlanner& kv) {
  Planning p{running, std::list<SeqView>(waiting.begin(), waiting.end()), {}, kv, {}};
  int64_t budget = limits.max_batch_tokens;
  const bool timed = limits.max_step_ms != 0 && limits.cost;
  double step_ms = timed ? limits.cost->base_ms() : 0;
  bool decodes = false;
  std::optional<double> target;  // fixed at the first prefill, once the decodes are planned
  auto remaining = [&] {
    if (!target) {
      if (!timed || !decodes)
        target = INFINITY;  // untimed, or no decodes: nobody to stall
      else
        target = limits.max_step_ms > 0 ? limits.max_step_ms
                                        : limits.step_factor * full_batch_decode_ms(p.out.shape, limits);
    }
    return *target - step_ms;
  };
  bool prefilled = false;  // some prefill got tokens this step
  auto add = [&](const SeqView& s, int64_t n) {
    p.out.work.push_back({s.id, n});
    budget -= n;
    p.out.shape.tokens += n;
    p.out.shape.attended += attended_positions(s.n_computed, n);
    if (timed) step_ms = limits.cost->predict_ms(p.out.shape);
    prefilled = prefilled || !s.decoding();
    decodes = decodes || s.decoding();
  };

  // Running sequences: decodes first, then prefill chunks; both in priority order.
  std::vector<SeqView> order = running;
  std::stable_sort(order.begin(), order.end(), [](const SeqView& a, const SeqView& b) {
    if (a.decoding() != b.decoding()) return a.decoding();
    return a.priority != b.priority ? a.priority > b.priority : a.admit_order < b.admit_order;
  });
  for (const SeqView& s : order) {
    if (budget <= 0) break;
    if (!p.is_running(s.id)) continue;  // preempted earlier in this loop
    int64_t n = std::min(s.pending(), budget);
    if (!s.decoding()) n = prefill_tokens(n, s.n_computed, remaining(), !prefilled, limits);
    if (n <= 0) continue;
    const bool room = s.decoding() ? p.make_room(s, s.n_computed + n) : kv.reserve(s.id, s.n_computed + n);
    if (!room) continue;
    add(s, n);
  }
  // Work may name sequences preempted after they were scheduled: keep only running ones.
  std::erase_if(p.out.work, [&](const ScheduledChunk& w) { return !p.is_running(w.id); });

  // Admit waiting requests while blocks, slots, budget and step time last.
  int64_t n_running = int64_t(p.running.size());
  while (budget > 0 && n_running < limits.max_running && !p.waiting.empty()) {
    SeqView s = p.waiting.front();
    s.n_computed = kv.reuse_prefix(s.id);
    const int64_t n = prefill_tokens(std::min(s.pending(), budget), s.n_computed, remaining(), !prefilled, limits);
    if (n <= 0 || !kv.reserve(s.id, s.n_computed + n)) {
      kv.release(s.id);
      break;
    }
    p.waiting.pop_front();
    p.out.admitted.push_back(s.id);
    add(s, n);
    ++n_running;
  }
  p.out.predicted_ms = timed ? step_ms : 0;
  p.out.target_ms = timed && target && std::isfinite(*target) ? *target : 0;
  return std::move(p.out);
}

}  // namespace autoglm
