#include "engine/ngram_drafter.h"

#include <algorithm>

namespace autoglm {
namespace {

struct Match {
  int64_t continuation = -1;  // where the most recent earlier occurrence's continuation starts
  int64_t occurrences = 0;    // earlier occurrences of the key
  int64_t agreeing = 0;       // ...that continue with the same token as the most recent one
};

// Earlier occurrences of the last n tokens of h (each followed by at least one token): the most
// recent only, or all of them when `count_all` (the confidence needs them).
Match find_key(const std::vector<int32_t>& h, int64_t n, bool count_all) {
  Match m;
  const int64_t len = int64_t(h.size());
  const int32_t* key = h.data() + len - n;
  for (int64_t start = len - n - 1; start >= 0; --start) {
    if (!std::equal(key, key + n, h.data() + start)) continue;
    const int64_t next = start + n;
    if (m.continuation < 0) m.continuation = next;
    ++m.occurrences;
    m.agreeing += h[size_t(next)] == h[size_t(m.continuation)];
    if (!count_all) break;
  }
  return m;
}

}  // namespace

NgramDrafter::NgramDrafter(int32_t ngram_min, int32_t ngram_max, float p_min)
    : ngram_min_(ngram_min), ngram_max_(ngram_max), p_min_(p_min) {}

Status NgramDrafter::propose(std::span<DraftJob> jobs) {
  for (DraftJob& job : jobs) job.drafts = lookup(*job.history, job.max_tokens);
  return Status::ok();
}

std::vector<int32_t> NgramDrafter::lookup(const std::vector<int32_t>& history, int32_t max_tokens) const {
  const int64_t len = int64_t(history.size());
  for (int64_t n = std::min<int64_t>(ngram_max_, len - 1); n >= ngram_min_; --n) {
    const Match m = find_key(history, n, /*count_all=*/p_min_ > 0.0f);
    if (m.continuation < 0) continue;
    if (double(m.agreeing) < double(p_min_) * double(m.occurrences)) return {};
    const int64_t end = std::min<int64_t>(len, m.continuation + std::max(0, max_tokens));
    return {history.begin() + m.continuation, history.begin() + end};
  }
  return {};
}

}  // namespace autoglm
