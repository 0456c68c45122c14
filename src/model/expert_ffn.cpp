#include "model/expert_ffn.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "core/parallel_rows.h"
#include "kernels/cpu/ops.h"

namespace autoglm {
namespace {

std::atomic<int64_t> g_expert_bytes{0};

void add_bias(float* y, const float* bias, int64_t width) {
  for (int64_t i = 0; i < width; ++i) y[i] += bias[i];
}

// The gated activation of gathered rows [r0, r1), each with its expert's biases (gpt-oss).
void activate_expert_rows(const ExpertWeights& w, const ModelSpec& spec, ExpertScratch& s, int64_t r0, int64_t r1) {
  const int64_t f = spec.moe.n_ff_exp;
  for (int64_t r = r0; r < r1; ++r) {
    float *g = s.gate.data() + r * f, *u = s.up.data() + r * f;
    const int64_t e = s.expert_of_row[size_t(r)];
    if (!w.gate_bias.empty()) add_bias(g, w.gate_bias.data() + e * f, f);
    if (!w.up_bias.empty()) add_bias(u, w.up_bias.data() + e * f, f);
    apply_activation(spec, g, u, f);
  }
}

// How many gathered rows (token, choice slots) expert e has.
int64_t rows_of(const ExpertScratch& s, int64_t e) {
  return s.first[size_t(e + 1)] - s.first[size_t(e)];
}

// Expert e's input rows: its one token's row of x itself where it has one (a decode step: the
// experts that share a token then share one input, made once in the weights' format), else its
// rows gathered into s.x.
const float* expert_input(const ExpertScratch& s, const float* x, int64_t d, int64_t k, int64_t e) {
  const int64_t r0 = s.first[size_t(e)];
  if (rows_of(s, e) == 1) return x + (s.slot_of[size_t(r0)] / k) * d;
  return s.x.data() + r0 * d;
}

// Every chosen expert's gate and up over its gathered rows, and the shared expert's over all
// tokens, in one job for the threads; then the activations; then every down projection in a
// second job. Outputs: s.out (by gathered row) and s.shared_out.
void run_expert_matmuls(ThreadPool& pool, const ExpertWeights& w, const ModelSpec& spec, const float* x, int64_t T,
                        ExpertScratch& s) {
  const int64_t d = spec.n_embd, f = spec.moe.n_ff_exp, n_expert = spec.moe.n_expert;
  const int64_t n_rows = s.first[size_t(n_expert)];
  const bool shared = w.shared_gate.rows > 0;
  const int64_t fs = shared ? w.shared_gate.rows : 0;
  std::vector<cpu::MatmulJob>& jobs = s.jobs;
  jobs.clear();
  for (int64_t e = 0; e < n_expert; ++e) {
    const int64_t r0 = s.first[size_t(e)], n = rows_of(s, e);
    if (n == 0) continue;
    const float* in = expert_input(s, x, d, spec.moe.n_expert_used, e);
    jobs.push_back({&w.gate[size_t(e)], in, n, s.gate.data() + r0 * f});
    jobs.push_back({&w.up[size_t(e)], in, n, s.up.data() + r0 * f});
    g_expert_bytes += w.gate[size_t(e)].bytes() + w.up[size_t(e)].bytes() + w.down[size_t(e)].bytes();
  }
  if (shared) {
    s.shared_gate.resize(size_t(T * fs));
    s.shared_up.resize(size_t(T * fs));
    s.shared_out.resize(size_t(T * d));
    s.shared_scale.resize(size_t(T));
    jobs.push_back({&w.shared_gate, x, T, s.shared_gate.data()});
    jobs.push_back({&w.shared_up, x, T, s.shared_up.data()});
    if (w.shared_gate_inp.rows > 0) jobs.push_back({&w.shared_gate_inp, x, T, s.shared_scale.data()});
  }
  cpu::matmul_batch(pool, jobs.data(), int(jobs.size()));

  for_rows(pool, n_rows, f, [&](int64_t r0, int64_t r1) { activate_expert_rows(w, spec, s, r0, r1); });
  if (shared)
    for_rows(pool, T, fs, [&](int64_t t0, int64_t t1) {
      apply_activation(spec, s.shared_gate.data() + t0 * fs, s.shared_up.data() + t0 * fs, (t1 - t0) * fs);
    });

  jobs.clear();
  for (int64_t e = 0; e < n_expert; ++e) {
    const int64_t r0 = s.first[size_t(e)], n = rows_of(s, e);
    if (n > 0) jobs.push_back({&w.down[size_t(e)], s.gate.data() + r0 * f, n, s.out.data() + r0 * d});
  }
  if (shared) jobs.push_back({&w.shared_down, s.shared_gate.data(), T, s.shared_out.data()});
  cpu::matmul_batch(pool, jobs.data(), int(jobs.size()));
}

// y[t] = sum of t's expert outputs in its choice order, plus the shared expert (qwen2moe:
// times sigmoid of its gate), for tokens [t0, t1).
void sum_token_outputs(const ExpertWeights& w, const ModelSpec& spec, const float* weights, float* y,
                       const ExpertScratch& s, int64_t t0, int64_t t1) {
  const int64_t d = spec.n_embd, k = spec.moe.n_expert_used;
  const bool shared = w.shared_gate.rows > 0;
  for (int64_t t = t0; t < t1; ++t) {
    float* yt = y + t * d;
    std::fill(yt, yt + d, 0.0f);
    for (int64_t i = 0; i < k; ++i) {
      const float wt = weights[t * k + i];
      const int64_t r = s.row_of_slot[size_t(t * k + i)];
      const float* o = s.out.data() + r * d;
      const float* down_bias = w.down_bias.empty() ? nullptr : w.down_bias.data() + s.expert_of_row[size_t(r)] * d;
      for (int64_t j = 0; j < d; ++j) yt[j] += wt * (down_bias ? o[j] + down_bias[j] : o[j]);
    }
    if (!shared) continue;
    const float gate = w.shared_gate_inp.rows > 0 ? 1.0f / (1.0f + std::exp(-s.shared_scale[size_t(t)])) : 1.0f;
    for (int64_t j = 0; j < d; ++j) yt[j] += gate * s.shared_out[size_t(t * d + j)];
  }
}

}  // namespace

void group_by_expert(const int32_t* ids, int64_t n_slots, int64_t n_expert, ExpertScratch& s) {
  s.first.assign(size_t(n_expert + 1), 0);
  for (int64_t i = 0; i < n_slots; ++i) ++s.first[size_t(ids[i] + 1)];
  for (int64_t e = 0; e < n_expert; ++e) s.first[size_t(e + 1)] += s.first[size_t(e)];
  s.slot_of.resize(size_t(n_slots));
  s.row_of_slot.resize(size_t(n_slots));
  s.expert_of_row.resize(size_t(n_slots));
  std::vector<int64_t> next(s.first.begin(), s.first.end() - 1);
  for (int64_t i = 0; i < n_slots; ++i) {
    const int64_t r = next[size_t(ids[i])]++;
    s.slot_of[size_t(r)] = int32_t(i);
    s.row_of_slot[size_t(i)] = r;
    s.expert_of_row[size_t(r)] = ids[i];
  }
}

int64_t expert_weight_bytes_read() {
  return g_expert_bytes.load();
}

void apply_activation(const ModelSpec& spec, float* gate, const float* up, int64_t n) {
  if (spec.activation == FfnActivation::kClampedSwiglu)
    cpu::clamped_swiglu(gate, up, n, spec.swiglu_alpha, spec.swiglu_limit);
  else
    cpu::silu_mul(gate, up, n);
}

void run_experts(ThreadPool& pool, const ExpertWeights& w, const ModelSpec& spec, const float* x, int64_t T,
                 const int32_t* ids, const float* weights, float* y, ExpertScratch& s) {
  const int64_t d = spec.n_embd, k = spec.moe.n_expert_used, n_slots = T * k;
  group_by_expert(ids, n_slots, spec.moe.n_expert, s);
  s.x.resize(size_t(n_slots * d));
  s.gate.resize(size_t(n_slots * spec.moe.n_ff_exp));
  s.up.resize(size_t(n_slots * spec.moe.n_ff_exp));
  s.out.resize(size_t(n_slots * d));
  for_rows(pool, n_slots, d, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (rows_of(s, s.expert_of_row[size_t(r)]) == 1) continue;  // read from x itself (expert_input)
      const float* src = x + (s.slot_of[size_t(r)] / k) * d;
      std::copy(src, src + d, s.x.data() + r * d);
    }
  });
  run_expert_matmuls(pool, w, spec, x, T, s);
  for_rows(pool, T, k * d, [&](int64_t t0, int64_t t1) { sum_token_outputs(w, spec, weights, y, s, t0, t1); });
}

}  // namespace autoglm
