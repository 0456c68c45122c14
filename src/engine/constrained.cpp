#include "engine/constrained.h"

#include <map>
#include <mutex>

namespace autoglm {

std::shared_ptr<const TokenTrie> token_trie_for(const Tokenizer& tokenizer) {
  static std::mutex mutex;
  static std::map<const Tokenizer*, std::weak_ptr<const TokenTrie>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(&tokenizer); it != cache.end())
    if (auto trie = it->second.lock(); trie && trie->n_vocab() == tokenizer.n_vocab()) return trie;
  std::vector<std::string> bytes(size_t(tokenizer.n_vocab()));
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) bytes[size_t(id)] = tokenizer.token_to_piece(id, false);
  auto trie = std::make_shared<const TokenTrie>(bytes);
  cache[&tokenizer] = trie;
  return trie;
}

std::unique_ptr<GrammarMatcher> make_matcher(const Tokenizer& tokenizer, std::shared_ptr<const Grammar> grammar) {
  if (!grammar) return nullptr;
  return std::make_unique<GrammarMatcher>(std::move(grammar), token_trie_for(tokenizer), tokenizer.vocab().eog_ids());
}

int32_t sample_next(Sampler& sampler, GrammarMatcher* matcher, float* logits, int32_t n_vocab,
                    const std::vector<int32_t>& history, int64_t budget) {
  if (!matcher) return sampler.sample(logits, n_vocab, history);
  if (!matcher->apply(logits, n_vocab, budget)) return -1;
  const int32_t token = sampler.sample(logits, n_vocab, history);
  if (!matcher->accept(token)) return -1;
  return token;
}

}  // namespace autoglm
