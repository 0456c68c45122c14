#include "model/lora_apply.h"

#include <algorithm>
#include <map>

#include "kernels/cpu/matmul.h"

namespace autoglm {
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
    const bool contiguous = g.tokens.back() - g.tokens.front() + 1 == n;
    const size_t need = size_t(n * (contiguous ? 0 : d->n_in) + n * r + n * d->n_out);
    if (scratch.size() < need) scratch.resize(need);
    float* gathered = scratch.data();
    float* ax = gathered + (contiguous ? 0 : n * d->n_in);
    float* delta = ax + n * r;
    const float* xs = x + g.tokens.front() * d->n_in;
    if (!contiguous) {
      for (int64_t t = 0; t < n; ++t) std::copy_n(x + g.tokens[size_t(t)] * d->n_in, d->n_in, gathered + t * d->n_in);
      xs = gathered;
    }
    // The float kernels, as for F32 weights: A and B are matrices of their own.
    const cpu::WeightMatrix a{
        DType::F32, reinterpret_cast<const uint8_t*>(d->a.data()), r, d->n_in, d->n_in * int64_t(sizeof(float)),
        nullptr};
    const cpu::WeightMatrix b{
        DType::F32, reinterpret_cast<const uint8_t*>(d->b.data()), d->n_out, r, r * int64_t(sizeof(float)), nullptr};
    cpu::matmul(pool, a, xs, n, ax);
    const float scale = g.adapter->scale;
    for (int64_t i = 0; i < n * r; ++i) ax[i] *= scale;
    cpu::matmul(pool, b, ax, n, delta);
    for (int64_t t = 0; t < n; ++t) {
      float* row = y + g.tokens[size_t(t)] * d->n_out;
      const float* add = delta + t * d->n_out;
      for (int64_t o = 0; o < d->n_out; ++o) row[o] += add[o];
    }
  }
}

}  // namespace autoglm
