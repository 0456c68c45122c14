#include "model/expert_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "core/parallel_rows.h"

namespace autoglm {
namespace {

// One token's working vectors, kept across the tokens of a call: a prompt's routing made four
// allocations a token and layer without them.
struct RoutingScratch {
  std::vector<float> p, score, worth, group_scores;
  std::vector<uint8_t> eligible;
  std::vector<int32_t> order, groups;
};

// The k best of `score` among the eligible (null: all), best first, lower id on ties.
void top_k(const std::vector<float>& score, const uint8_t* eligible, int64_t k, int32_t* ids,
           std::vector<int32_t>& order) {
  order.clear();
  for (int32_t e = 0; e < int32_t(score.size()); ++e)
    if (!eligible || eligible[e]) order.push_back(e);
  AUTOGLM_CHECK(int64_t(order.size()) >= k);  // validate_spec: the eligible groups hold k experts
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return score[size_t(a)] > score[size_t(b)] || (score[size_t(a)] == score[size_t(b)] && a < b);
  });
  std::copy(order.begin(), order.begin() + k, ids);
}

// Grouped routing (DeepSeek-V3): a group's worth is the sum of its two best scores; only the
// best n_group_used groups keep their experts eligible. Fills s.eligible from s.score.
void mark_eligible_experts(const MoeSpec& m, RoutingScratch& s) {
  s.eligible.assign(s.score.size(), 1);
  if (m.n_group <= 1) return;
  const int64_t per_group = m.n_expert / m.n_group;
  s.worth.resize(size_t(m.n_group));
  for (int64_t g = 0; g < m.n_group; ++g) {
    s.group_scores.assign(s.score.begin() + g * per_group, s.score.begin() + (g + 1) * per_group);
    std::sort(s.group_scores.begin(), s.group_scores.end(), std::greater<float>());
    s.worth[size_t(g)] = s.group_scores[0] + (s.group_scores.size() > 1 ? s.group_scores[1] : 0.0f);
  }
  s.groups.resize(size_t(m.n_group));
  top_k(s.worth, nullptr, m.n_group_used, s.groups.data(), s.order);
  std::fill(s.eligible.begin(), s.eligible.end(), 0);
  for (int64_t i = 0; i < m.n_group_used; ++i)
    for (int64_t e = 0; e < per_group; ++e) s.eligible[size_t(s.groups[size_t(i)] * per_group + e)] = 1;
}

// The gate's probabilities (what the weights are made of) for one token, into p.
void gate_probabilities(ExpertGating gating, const float* logits, int64_t n, std::vector<float>& p) {
  p.assign(logits, logits + n);
  if (gating == ExpertGating::kSigmoid) {
    for (float& v : p) v = 1.0f / (1.0f + std::exp(-v));
  } else if (gating == ExpertGating::kSoftmax) {
    const float mx = *std::max_element(p.begin(), p.end());
    double sum = 0;
    for (float& v : p) sum += (v = std::exp(v - mx));
    for (float& v : p) v = float(v / sum);
  }
  // kSoftmaxSelected: the logits themselves; the softmax comes after the choice
}

void route_one(const MoeSpec& m, const float* logits, const float* selection_bias, int32_t* ids, float* weights,
               RoutingScratch& s) {
  const int64_t n = m.n_expert, k = m.n_expert_used;
  gate_probabilities(m.gating, logits, n, s.p);
  s.score = s.p;
  if (selection_bias)
    for (int64_t e = 0; e < n; ++e) s.score[size_t(e)] += selection_bias[e];
  mark_eligible_experts(m, s);
  top_k(s.score, s.eligible.data(), k, ids, s.order);
  for (int64_t i = 0; i < k; ++i) weights[i] = s.p[size_t(ids[i])];
  if (m.gating == ExpertGating::kSoftmaxSelected) {
    const float mx = *std::max_element(weights, weights + k);
    double sum = 0;
    for (int64_t i = 0; i < k; ++i) sum += (weights[i] = std::exp(weights[i] - mx));
    for (int64_t i = 0; i < k; ++i) weights[i] = float(weights[i] / sum);
  } else if (m.norm_weights) {
    const double sum = std::accumulate(weights, weights + k, 0.0);
    for (int64_t i = 0; i < k; ++i) weights[i] = float(weights[i] / sum);
  }
  for (int64_t i = 0; i < k; ++i) weights[i] *= m.weights_scale;
}

}  // namespace

void route_experts(const MoeSpec& moe, const float* logits, const float* selection_bias, int64_t n_tokens, int32_t* ids,
                   float* weights) {
  RoutingScratch scratch;
  for (int64_t t = 0; t < n_tokens; ++t)
    route_one(moe, logits + t * moe.n_expert, selection_bias, ids + t * moe.n_expert_used,
              weights + t * moe.n_expert_used, scratch);
}

void route_layer(const MoeSpec& moe, float* logits, const std::vector<float>& router_bias,
                 const std::vector<float>& selection_bias, int64_t n_tokens, std::vector<int32_t>& ids,
                 std::vector<float>& weights, ThreadPool* pool) {
  const int64_t n = moe.n_expert, k = moe.n_expert_used;
  ids.resize(size_t(n_tokens * k));
  weights.resize(size_t(n_tokens * k));
  const auto route = [&](int64_t t0, int64_t t1) {
    if (!router_bias.empty())
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t e = 0; e < n; ++e) logits[t * n + e] += router_bias[size_t(e)];
    route_experts(moe, logits + t0 * n, selection_bias.empty() ? nullptr : selection_bias.data(), t1 - t0,
                  ids.data() + t0 * k, weights.data() + t0 * k);
  };
  // A token's routing (its exponentials, a partial sort) costs about what a norm over 16 floats
  // an expert does: the width for_rows weighs against its threshold.
  constexpr int64_t kFloatsPerExpert = 16;
  if (pool)
    for_rows(*pool, n_tokens, kFloatsPerExpert * n, route);
  else
    route(0, n_tokens);
}

}  // namespace autoglm
