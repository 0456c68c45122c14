// The routed experts of one mixture-of-experts layer on the CPU: the tokens of a step
// grouped by expert, so each chosen expert's weights are read once per step and no other
// expert's at all; then each token's outputs summed in its own choice order (best first),
// which keeps a token's result independent of its batch.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "model/model_spec.h"
#include "model/weights.h"

namespace autoglm {

// Per-step buffers, grown to the largest step and kept.
struct ExpertScratch {
  std::vector<int32_t> slot_of;         // [n_slots]: per expert, the (token * k + choice) slots routed to it
  std::vector<int64_t> first;           // [n_expert + 1]: start of each expert's slots
  std::vector<float> x, gate, up, out;  // gathered inputs [n_slots, n_embd], hidden, outputs
  std::vector<float> shared_gate, shared_up, shared_out, shared_scale;
  std::vector<int64_t> row_of_slot;    // [n_slots]: the gathered row of each slot
  std::vector<int32_t> expert_of_row;  // [n_slots]: the expert of each gathered row
  std::vector<cpu::MatmulJob> jobs;
};

// Slots (token * k + choice of ids) sorted by expert, in token order within an expert, into
// s.slot_of and s.first; the gathered row of each slot (s.row_of_slot); and each gathered
// row's expert (s.expert_of_row). A GPU runs its experts over the same grouping.
void group_by_expert(const int32_t* ids, int64_t n_slots, int64_t n_expert, ExpertScratch& s);

// Bytes of expert weights the CPU experts multiplied since the process started (a test hook:
// decode must read only the chosen experts).
int64_t expert_weight_bytes_read();

// y[t] = sum over t's choices i of weights[t, i] * expert_{ids[t, i]}(x[t]), plus the shared
// expert; x and y are [n_tokens, n_embd].
void run_experts(ThreadPool& pool, const ExpertWeights& w, const ModelSpec& spec, const float* x, int64_t n_tokens,
                 const int32_t* ids, const float* weights, float* y, ExpertScratch& scratch);

// The gated activation of an FFN's hidden rows.
void apply_activation(const ModelSpec& spec, float* gate, const float* up, int64_t n);

}  // namespace autoglm
