#include "engine/model_drafter.h"

#include <algorithm>
#include <cmath>

namespace autoglm {
namespace {

constexpr int64_t kCatchUpChunk = 512;  // tokens per pass while draft caches catch up with prompts

}  // namespace

// A run of one job's tokens at consecutive positions; `last`: its final token drafts.
struct ModelDrafter::Run {
  size_t job;
  const int32_t* tokens;
  int64_t n;
  int64_t pos;
  bool last;
};

int32_t confident_argmax(const float* row, int64_t n_vocab, float p_min) {
  const int32_t best = int32_t(std::max_element(row, row + n_vocab) - row);
  if (p_min <= 0.0f) return best;
  double sum = 0;  // the best token's probability is 1 / sum
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(double(row[i]) - double(row[best]));
  return 1.0 / sum >= double(p_min) ? best : -1;
}

ModelDrafter::ModelDrafter(const Model& draft, ThreadPool& pool, int64_t n_blocks, int64_t block_size, DType kv_type,
                           float p_min)
    : spec_(draft.spec()),
      runner_(draft, pool),
      pool_(std::make_unique<BlockPool>(draft.spec(), n_blocks, block_size, *kv_format(draft.spec(), kv_type),
                                        draft.device())),
      p_min_(p_min) {
  pool_->set_prefix_caching(false);
}

ModelDrafter::ModelDrafter(const Model& model, ThreadPool& pool, int32_t exit_layer, float p_min)
    : spec_(model.spec()), runner_(model, pool), exit_layer_(exit_layer), p_min_(p_min) {}

KvCache* ModelDrafter::cache_for(const DraftJob& job, std::span<DraftJob> jobs) {
  const int64_t positions = int64_t(job.history->size()) + job.max_tokens - 1;  // the last draft never runs
  if (!pool_) return job.target_cache && job.target_cache->capacity() >= positions ? job.target_cache : nullptr;
  auto& slot = cached_[job.sequence];
  if (!slot) slot = std::make_unique<Cached>(*pool_);
  if (slot->kv.reserve(positions)) return &slot->kv;
  // Short of blocks: the sequences outside this call give theirs back.
  for (auto it = cached_.begin(); it != cached_.end();) {
    const bool in_call =
        std::any_of(jobs.begin(), jobs.end(), [&](const DraftJob& j) { return j.sequence == it->first; });
    it = in_call ? std::next(it) : cached_.erase(it);
  }
  return slot->kv.reserve(positions) ? &slot->kv : nullptr;
}

Status ModelDrafter::run_pass(const std::vector<Run>& runs, std::span<DraftJob> jobs,
                              const std::vector<KvCache*>& caches, std::vector<bool>& drafting) {
  Batch batch;
  batch.exit_layer = exit_layer_;
  for (const Run& r : runs) {
    batch.caches.push_back(caches[r.job]);
    batch.add_sequence_tokens(int32_t(batch.caches.size() - 1), r.tokens, r.n, int32_t(r.pos), r.last);
  }
  AUTOGLM_RETURN_IF_ERROR(runner_.forward(batch, logits_));
  size_t row = 0;
  for (const Run& r : runs) {
    if (!r.last) continue;
    DraftJob& job = jobs[r.job];
    const int32_t token = confident_argmax(logits_.data() + row++ * size_t(spec_.n_vocab), spec_.n_vocab, p_min_);
    if (token >= 0) job.drafts.push_back(token);
    drafting[r.job] = token >= 0 && int32_t(job.drafts.size()) < job.max_tokens;
  }
  return Status::ok();
}

Status ModelDrafter::catch_up(std::span<DraftJob> jobs, const std::vector<KvCache*>& caches,
                              std::vector<bool>& drafting) {
  std::vector<Run> runs;
  int64_t room = kCatchUpChunk;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!caches[i]) continue;
    const std::vector<int32_t>& h = *jobs[i].history;
    int64_t start = int64_t(h.size()) - 1;  // in the target's cache: the target holds the rest
    if (pool_) {
      std::vector<int32_t>& held = cached_[jobs[i].sequence]->tokens;
      start =
          std::min<int64_t>(std::mismatch(held.begin(), held.end(), h.begin(), h.end()).first - held.begin(), start);
      if (int64_t(h.size()) - start > jobs[i].catch_up_limit) continue;  // it drafts nothing
      held = h;
    }
    // Split into passes of at most kCatchUpChunk tokens.
    for (Run r{i, h.data() + start, int64_t(h.size()) - start, start, false}; r.n > 0;) {
      const int64_t n = std::min(r.n, room);
      runs.push_back({i, r.tokens, n, r.pos, n == r.n});
      r.tokens += n, r.n -= n, r.pos += n, room -= n;
      if (room > 0) continue;
      AUTOGLM_RETURN_IF_ERROR(run_pass(runs, jobs, caches, drafting));
      runs.clear();
      room = kCatchUpChunk;
    }
  }
  return runs.empty() ? Status::ok() : run_pass(runs, jobs, caches, drafting);
}

Status ModelDrafter::propose(std::span<DraftJob> jobs) {
  std::vector<KvCache*> caches(jobs.size(), nullptr);
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].drafts.clear();
    if (!jobs[i].history->empty() && jobs[i].max_tokens > 0) caches[i] = cache_for(jobs[i], jobs);
  }
  std::vector<bool> drafting(jobs.size(), false);
  Status st = catch_up(jobs, caches, drafting);
  // Then one pass per drafted position, over the jobs still drafting.
  while (st.is_ok()) {
    std::vector<Run> runs;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (!drafting[i]) continue;
      const int32_t* last = &jobs[i].drafts.back();
      runs.push_back({i, last, 1, int64_t(jobs[i].history->size() + jobs[i].drafts.size()) - 1, true});
      if (pool_) cached_[jobs[i].sequence]->tokens.push_back(*last);
    }
    if (runs.empty()) break;
    st = run_pass(runs, jobs, caches, drafting);
  }
  if (!st.is_ok())  // what the caches hold is no longer known
    for (DraftJob& job : jobs) forget(job.sequence), job.drafts.clear();
  return st;
}

}  // namespace autoglm
