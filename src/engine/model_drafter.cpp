#include "engine/model_drafter.h"

#include <algorithm>
#include <cmath>

namespace autoglm {
namespace {

constexpr int64_t kCatchUpChunk = 512;  // tokens per pass when the draft cache catches up with a prompt

}  // namespace

ModelDrafter::ModelDrafter(const Model& draft, ThreadPool& pool, int64_t n_ctx, DType kv_type, float p_min)
    : spec_(draft.spec()),
      runner_(draft, pool),
      own_cache_(std::make_unique<ContiguousKvCache>(draft.spec(), n_ctx, kv_type)),
      cache_(own_cache_.get()),
      p_min_(p_min) {}

ModelDrafter::ModelDrafter(const Model& target, ThreadPool& pool, KvCache& target_cache, int32_t exit_layer,
                           float p_min)
    : spec_(target.spec()), runner_(target, pool), cache_(&target_cache), exit_layer_(exit_layer), p_min_(p_min) {}

Status ModelDrafter::run(const int32_t* tokens, int64_t n, int32_t pos) {
  Batch batch;
  batch.caches = {cache_};
  batch.exit_layer = exit_layer_;
  batch.add_sequence_tokens(0, tokens, n, pos, true);
  return runner_.forward(batch, logits_);
}

Status ModelDrafter::catch_up(const std::vector<int32_t>& history) {
  const int64_t len = int64_t(history.size());
  if (!own_cache_) return run(&history.back(), 1, int32_t(len - 1));  // the target holds the rest
  const auto differ = std::mismatch(cached_.begin(), cached_.end(), history.begin(), history.end());
  int64_t start = std::min<int64_t>(differ.first - cached_.begin(), len - 1);
  cached_.resize(size_t(start));
  for (; start < len; start += kCatchUpChunk) {
    const int64_t n = std::min(kCatchUpChunk, len - start);
    AUTOGLM_RETURN_IF_ERROR(run(history.data() + start, n, int32_t(start)));
    cached_.insert(cached_.end(), history.begin() + start, history.begin() + start + n);
  }
  return Status::ok();
}

int32_t ModelDrafter::confident_argmax() const {
  const float* row = logits_.data();
  const int64_t n = spec_.n_vocab;
  const int32_t best = int32_t(std::max_element(row, row + n) - row);
  if (p_min_ <= 0.0f) return best;
  double sum = 0;  // the best token's probability is 1 / sum
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(row[i]) - double(row[best]));
  return 1.0 / sum >= double(p_min_) ? best : -1;
}

Status ModelDrafter::propose(const std::vector<int32_t>& history, int32_t max_tokens, std::vector<int32_t>& drafts) {
  drafts.clear();
  if (history.empty() || max_tokens <= 0) return Status::ok();
  const int64_t room = cache_->capacity() - int64_t(history.size());
  max_tokens = int32_t(std::min<int64_t>(max_tokens, room));
  if (max_tokens <= 0) return Status::ok();
  AUTOGLM_RETURN_IF_ERROR(catch_up(history));
  for (int32_t i = 0; i < max_tokens; ++i) {
    const int32_t token = confident_argmax();
    if (token < 0) break;
    drafts.push_back(token);
    if (i + 1 == max_tokens) break;
    const int32_t pos = int32_t(history.size()) + i;
    AUTOGLM_RETURN_IF_ERROR(run(&token, 1, pos));
    if (own_cache_) cached_.push_back(token);
  }
  return Status::ok();
}

}  // namespace autoglm
