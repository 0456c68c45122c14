#include "model/lora_apply.h"

#include <algorithm>
#include <map>

namespace autoglm {
namespace {

float dot(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

std::vector<LoraGroup> group_by_adapter(const std::vector<int32_t>& seq, const std::vector<const LoraSet*>& sets) {
  std::vector<LoraGroup> groups;
  size_t depth = 0;
  for (const LoraSet* s : sets)
    if (s) depth = std::max(depth, s->size());
  for (size_t k = 0; k < depth; ++k) {
    std::map<const LoraAdapter*, size_t> index;  // this round's groups
    for (size_t t = 0; t < seq.size(); ++t) {
      const size_t si = size_t(seq[t]);
      const LoraSet* s = si < sets.size() ? sets[si] : nullptr;
      if (!s || s->size() <= k) continue;
      const LoraAdapter* a = (*s)[k].get();
      auto [it, fresh] = index.emplace(a, groups.size());
      if (fresh) groups.push_back({a, {}});
      groups[it->second].tokens.push_back(int32_t(t));
    }
  }
  return groups;
}

void apply_loras(ThreadPool& pool, const std::vector<LoraGroup>& groups, int64_t layer, LoraTarget target,
                 const float* x, float* y, std::vector<float>& scratch) {
  for (const LoraGroup& g : groups) {
    const LoraDelta* d = g.adapter->delta(layer, target);
    if (!d) continue;
    const int64_t n = int64_t(g.tokens.size()), r = d->rank;
    if (int64_t(scratch.size()) < n * r) scratch.resize(size_t(n * r));
    float* ax = scratch.data();
    // A x for every token of the group: each row of A read once.
    pool.parallel_for(r, [&](int, int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i)
        for (int64_t t = 0; t < n; ++t)
          ax[t * r + i] = dot(&d->a[size_t(i * d->n_in)], x + g.tokens[size_t(t)] * d->n_in, d->n_in);
    });
    const float scale = g.adapter->scale;
    pool.parallel_for(d->n_out, [&](int, int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o)
        for (int64_t t = 0; t < n; ++t)
          y[g.tokens[size_t(t)] * d->n_out + o] += scale * dot(&d->b[size_t(o * r)], &ax[t * r], r);
    });
  }
}

}  // namespace autoglm
