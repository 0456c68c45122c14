#include "model/batch.h"

namespace autoglm {

void Batch::add_sequence_tokens(int32_t seq_index, const int32_t* ids, int64_t n, int32_t start_pos,
                                bool logits_for_last, bool logits_for_all) {
  for (int64_t i = 0; i < n; ++i) {
    if (logits_for_all || (logits_for_last && i == n - 1)) logit_tokens.push_back(int32_t(tokens.size()));
    tokens.push_back(ids[i]);
    positions.push_back(start_pos + int32_t(i));
    seq.push_back(seq_index);
  }
}

}  // namespace autoglm
