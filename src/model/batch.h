// One ragged batch for the forward pass: the new tokens of one or more sequences,
// concatenated, with the KV cache each sequence reads and writes.
#pragma once

#include <cstdint>
#include <vector>

#include "model/kv_cache.h"
#include "model/lora_set.h"

namespace autoglm {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> seq;           // per token: index into caches
  std::vector<KvCache*> caches;       // one per sequence in the batch
  std::vector<int32_t> logit_tokens;  // indices of the tokens whose logits are wanted, ascending
  // Instead of logits, the final normed hidden state (n_embd floats) of each logit token:
  // what embeddings pool.
  bool hidden_states = false;
  // > 0: only layers [0, exit_layer), then the final norm and output head: the early-exit
  // drafts of speculative decoding (they write those layers' KV rows).
  int32_t exit_layer = 0;
  // LoRA adapters per sequence (indexed like caches; absent, null or empty: the base alone).
  std::vector<const LoraSet*> loras;
  // Multimodal prompts (the cpu only). Empty, or one entry per token: n_embd floats that stand
  // for the token's embedding row (an image's rows at its placeholder tokens), or null.
  std::vector<const float*> embeddings;
  // Empty, or 3 per token (t, h, w; token-major): the M-RoPE position of each token, where an
  // image's tokens sit on a grid. Empty: every axis at the token's position.
  std::vector<int32_t> rope_positions;

  // Appends a run of tokens of sequence `seq_index` at consecutive positions from `start_pos`.
  void add_sequence_tokens(int32_t seq_index, const int32_t* ids, int64_t n, int32_t start_pos, bool logits_for_last,
                           bool logits_for_all = false);
};

}  // namespace autoglm
