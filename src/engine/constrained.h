// Constrained decoding where a request carries a grammar: the vocabulary's bytes in a trie
// (built on first use by its owner: an engine, a generator), and one sampling step that
// masks, samples and advances.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "sample/grammar.h"
#include "sample/sampler.h"
#include "sample/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {

// The trie of a tokenizer's token bytes (control tokens left out), built once when the
// first grammar needs it and shared by the matchers its owner makes. No process-wide cache.
class VocabularyTrie {
 public:
  explicit VocabularyTrie(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::shared_ptr<const TokenTrie> get() const;
  // The same with these control tokens in it under their text (a reply format's markers, which
  // its grammar spells: harmony's <|channel|>); built once per set.
  std::shared_ptr<const TokenTrie> get(const std::vector<int32_t>& visible_control) const;
  // A matcher for `grammar` over the vocabulary (and `visible_control`) and its end-of-generation
  // ids; null when there is no grammar.
  std::unique_ptr<GrammarMatcher> make_matcher(std::shared_ptr<const Grammar> grammar,
                                               const std::vector<int32_t>& visible_control = {}) const;

 private:
  const Tokenizer& tokenizer_;
  mutable std::once_flag built_;
  mutable std::shared_ptr<const TokenTrie> trie_;
  mutable std::mutex with_control_mutex_;
  mutable std::map<std::vector<int32_t>, std::shared_ptr<const TokenTrie>> with_control_;
};

// Samples one token, restricted to what `matcher` (if any) admits, and advances it.
// `budget`: tokens the sequence may still generate (this one included). -1 when the
// grammar admits nothing at all (the caller ends the sequence). `also_allowed` (>= 0): a token
// the sample may take besides (a thinking's open marker); the matcher does not see it.
int32_t sample_next(Sampler& sampler, GrammarMatcher* matcher, float* logits, int32_t n_vocab,
                    const std::vector<int32_t>& history, int64_t budget, int32_t also_allowed = -1);

}  // namespace autoglm
