#include "engine/mtp_drafter.h"

#include <algorithm>

#include "engine/model_drafter.h"

namespace autoglm {
namespace {

constexpr int64_t kCatchUpChunk = 512;  // tokens per pass while the block catches up with a prompt

ModelSpec one_layer(ModelSpec s) {
  s.n_layer = 1;
  s.n_nextn = 0;
  return s;
}

}  // namespace

// A run of one job's tokens at consecutive positions, each with its input hidden row.
struct MtpDrafter::Run {
  size_t job;
  const int32_t* tokens;
  const float* hidden;
  int64_t n;
  int64_t pos;
  bool last;
};

MtpDrafter::MtpDrafter(const Model& target, ThreadPool& pool, const DraftPool& kv, float p_min)
    : spec_(target.spec()),
      block_spec_(one_layer(target.spec())),
      runner_(target, pool),
      pool_(std::make_unique<BlockPool>(block_spec_, kv.n_blocks, kv.block_size, *kv_format(block_spec_, kv.kv_type),
                                        target.device())),
      p_min_(p_min) {
  pool_->set_prefix_caching(false);
}

void MtpDrafter::observe_target(uint64_t sequence, int64_t first_pos, const float* rows, int64_t n) {
  auto& slot = sequences_[sequence];
  if (!slot) slot = std::make_unique<Sequence>(*pool_);
  Sequence& s = *slot;
  const int64_t width = spec_.n_embd, held = int64_t(s.hidden.size()) / width;
  if (first_pos == 0) {  // from the start (again): whatever was lost is back
    s.lost = false;
    s.filled = 0;
    s.hidden.clear();
  }
  if (s.lost) return;
  if (first_pos < s.filled) {  // the target ran these positions again (preempted)
    s.filled = first_pos;
    s.hidden.clear();
  } else if (first_pos > s.filled + held) {  // rows it never saw: the block cannot catch up
    s.lost = true;
    s.hidden.clear();
    return;
  } else {  // rows past first_pos were rejected drafts'
    s.hidden.resize(size_t((first_pos - s.filled) * width));
  }
  s.hidden.insert(s.hidden.end(), rows, rows + n * width);
}

MtpDrafter::Sequence* MtpDrafter::ready(const DraftJob& job, std::span<DraftJob> jobs) {
  const int64_t p = int64_t(job.history->size()) - 1;  // the pending token's position
  auto it = sequences_.find(job.sequence);
  if (p < 1 || job.max_tokens <= 0 || it == sequences_.end()) return nullptr;
  Sequence& s = *it->second;
  const int64_t held = int64_t(s.hidden.size()) / spec_.n_embd;
  if (s.lost || s.filled >= p || s.filled + held < p) return nullptr;
  const int64_t positions = p + job.max_tokens - 1;  // the last draft never runs
  if (s.kv.reserve(positions)) return &s;
  // Short of blocks: the sequences outside this call give theirs back (and stop drafting).
  for (auto& entry : sequences_) {
    const uint64_t id = entry.first;
    if (std::any_of(jobs.begin(), jobs.end(), [&](const DraftJob& j) { return j.sequence == id; })) continue;
    entry.second->kv.release_all();
    entry.second->lost = true;
    entry.second->hidden.clear();
  }
  return s.kv.reserve(positions) ? &s : nullptr;
}

Status MtpDrafter::run_pass(const std::vector<Run>& runs, std::span<DraftJob> jobs, const std::vector<Sequence*>& seqs,
                            std::vector<bool>& drafting) {
  Batch batch;
  hidden_in_.clear();
  for (const Run& r : runs) {
    batch.caches.push_back(&seqs[r.job]->kv);
    batch.add_sequence_tokens(int32_t(batch.caches.size() - 1), r.tokens, r.n, int32_t(r.pos), r.last);
    hidden_in_.insert(hidden_in_.end(), r.hidden, r.hidden + r.n * spec_.n_embd);
  }
  AUTOGLM_RETURN_IF_ERROR(runner_.forward_nextn(batch, hidden_in_.data(), 0, logits_));
  AUTOGLM_RETURN_IF_ERROR(runner_.last_hidden(hidden_out_));
  size_t row = 0;
  int64_t token = 0;
  for (const Run& r : runs) {
    token += r.n;
    if (!r.last) continue;
    DraftJob& job = jobs[r.job];
    const int32_t draft = confident_argmax(logits_.data() + row++ * size_t(spec_.n_vocab), spec_.n_vocab, p_min_);
    if (draft >= 0) job.drafts.push_back(draft);
    drafting[r.job] = draft >= 0 && int32_t(job.drafts.size()) < job.max_tokens;
    const float* state = hidden_out_.data() + (token - 1) * spec_.n_embd;
    chained_[r.job].assign(state, state + spec_.n_embd);
  }
  return Status::ok();
}

Status MtpDrafter::catch_up(std::span<DraftJob> jobs, const std::vector<Sequence*>& seqs, std::vector<bool>& drafting) {
  std::vector<Run> runs;
  int64_t room = kCatchUpChunk;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!seqs[i]) continue;
    Sequence& s = *seqs[i];
    const std::vector<int32_t>& h = *jobs[i].history;
    const int64_t p = int64_t(h.size()) - 1;
    // Positions q in [filled, p): token q + 1 with the target's state at q.
    for (Run r{i, h.data() + s.filled + 1, s.hidden.data(), p - s.filled, s.filled, false}; r.n > 0;) {
      const int64_t n = std::min(r.n, room);
      runs.push_back({i, r.tokens, r.hidden, n, r.pos, n == r.n});
      r.tokens += n, r.hidden += n * spec_.n_embd, r.n -= n, r.pos += n, room -= n;
      if (room > 0) continue;
      AUTOGLM_RETURN_IF_ERROR(run_pass(runs, jobs, seqs, drafting));
      runs.clear();
      room = kCatchUpChunk;
    }
  }
  if (!runs.empty()) AUTOGLM_RETURN_IF_ERROR(run_pass(runs, jobs, seqs, drafting));
  // Position p - 1 stays pending: the next call runs it again for its logits.
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!seqs[i]) continue;
    Sequence& s = *seqs[i];
    const int64_t last = int64_t(jobs[i].history->size()) - 2;
    s.hidden.erase(s.hidden.begin(), s.hidden.begin() + (last - s.filled) * spec_.n_embd);
    s.hidden.resize(size_t(spec_.n_embd));
    s.filled = last;
  }
  return Status::ok();
}

Status MtpDrafter::propose(std::span<DraftJob> jobs) {
  std::vector<Sequence*> seqs(jobs.size(), nullptr);
  chained_.assign(jobs.size(), {});
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].drafts.clear();
    if (jobs[i].history) seqs[i] = ready(jobs[i], jobs);
  }
  std::vector<bool> drafting(jobs.size(), false);
  Status st = catch_up(jobs, seqs, drafting);
  // Then one pass per drafted position: each draft with the block's own state before it.
  while (st.is_ok()) {
    std::vector<Run> runs;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (!drafting[i]) continue;
      const int64_t pos = int64_t(jobs[i].history->size() + jobs[i].drafts.size()) - 2;
      runs.push_back({i, &jobs[i].drafts.back(), chained_[i].data(), 1, pos, true});
    }
    if (runs.empty()) break;
    st = run_pass(runs, jobs, seqs, drafting);
  }
  if (!st.is_ok())  // what the block's rows hold is no longer known
    for (DraftJob& job : jobs) forget(job.sequence), job.drafts.clear();
  return st;
}

}  // namespace autoglm
