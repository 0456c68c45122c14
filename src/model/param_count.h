// Parameter and weight-byte counts of a GGUF model: in all, and what one token uses.
#pragma once

#include <cstdint>
#include <string>

namespace autoglm {

class GgufFile;

struct ParamCount {
  int64_t params = 0;         // elements of every tensor
  int64_t active_params = 0;  // what one token uses (see count_params)
  int64_t bytes = 0;          // bytes of every tensor
  int64_t active_bytes = 0;   // weight bytes one token reads (see count_params)
};

// A routed-expert tensor: one slice per expert along its last dimension (blk.N.ffn_*_exps.*).
// Shared experts (ffn_*_shexp) and the router (ffn_gate_inp) are not routed: every token uses them.
bool is_routed_expert_tensor(const std::string& name);

// Counts as llama.cpp reports them. Parameters: every tensor counts, except that a routed-expert
// tensor counts only n_expert_used / n_expert of its elements in active_params; the token
// embedding counts in full in both (a model card's "3B active" includes it).
// Bytes read per token: the same rule, except that the token embedding table counts one row
// (a lookup), or in full where there is no output.weight (tied embeddings: it is the output
// matrix too). The output matrix counts in full. n_expert <= 0: a dense model (active == total).
ParamCount count_params(const GgufFile& file, int64_t n_expert, int64_t n_expert_used);

// The same, with n_expert and n_expert_used read from "<arch>.expert_count" and
// "<arch>.expert_used_count" (absent: a dense model).
ParamCount count_params(const GgufFile& file);

}  // namespace autoglm
