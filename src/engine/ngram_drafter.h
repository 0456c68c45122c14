// Prompt lookup: with no draft model, propose what followed the most recent earlier
// occurrence of the sequence's last n tokens (n from ngram_max down to ngram_min), in the
// prompt or the output so far. Free to run; it wins where the output copies its input
// (edits, extraction, code, JSON that repeats keys).
#pragma once

#include "engine/speculative.h"

namespace autoglm {

class NgramDrafter final : public Drafter {
 public:
  // p_min: the share of the key's earlier occurrences that must continue with the proposed
  // token (its confidence) for drafting to go ahead.
  NgramDrafter(int32_t ngram_min, int32_t ngram_max, float p_min);
  Status propose(std::span<DraftJob> jobs) override;
  // One history's drafts: up to max_tokens tokens, or none.
  std::vector<int32_t> lookup(const std::vector<int32_t>& history, int32_t max_tokens) const;

 private:
  int32_t ngram_min_, ngram_max_;
  float p_min_;
};

}  // namespace autoglm
