// Constrained decoding where a request carries a grammar: the vocabulary's bytes in a trie
// (built once per tokenizer), and one sampling step that masks, samples and advances.
#pragma once

#include <memory>
#include <vector>

#include "sample/grammar.h"
#include "sample/sampler.h"
#include "sample/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {

// The trie of the tokenizer's token bytes (control tokens left out), shared by every request.
std::shared_ptr<const TokenTrie> token_trie_for(const Tokenizer& tokenizer);

// A matcher for `grammar` over the tokenizer's vocabulary and end-of-generation ids; null
// when there is no grammar.
std::unique_ptr<GrammarMatcher> make_matcher(const Tokenizer& tokenizer, std::shared_ptr<const Grammar> grammar);

// Samples one token, restricted to what `matcher` (if any) admits, and advances it.
// `budget`: tokens the sequence may still generate (this one included). -1 when the
// grammar admits nothing at all (the caller ends the sequence).
int32_t sample_next(Sampler& sampler, GrammarMatcher* matcher, float* logits, int32_t n_vocab,
                    const std::vector<int32_t>& history, int64_t budget);

}  // namespace autoglm
