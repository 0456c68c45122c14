#include "engine/constrained.h"

namespace autoglm {

namespace {

// The trie of the vocabulary's token bytes (control tokens left out, but for `visible_control`,
// under their text).
std::shared_ptr<const TokenTrie> build_trie(const Tokenizer& tokenizer, const std::vector<int32_t>& visible_control) {
  std::vector<std::string> bytes(size_t(tokenizer.n_vocab()));
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) bytes[size_t(id)] = tokenizer.token_to_piece(id, false);
  for (int32_t id : visible_control)
    if (id >= 0 && id < tokenizer.n_vocab()) bytes[size_t(id)] = tokenizer.token_to_piece(id, true);
  return std::make_shared<const TokenTrie>(bytes);
}

}  // namespace

std::shared_ptr<const TokenTrie> VocabularyTrie::get() const {
  std::call_once(built_, [this] { trie_ = build_trie(tokenizer_, {}); });
  return trie_;
}

std::shared_ptr<const TokenTrie> VocabularyTrie::get(const std::vector<int32_t>& visible_control) const {
  if (visible_control.empty()) return get();
  std::lock_guard<std::mutex> lock(with_control_mutex_);
  std::shared_ptr<const TokenTrie>& trie = with_control_[visible_control];
  if (!trie) trie = build_trie(tokenizer_, visible_control);
  return trie;
}

std::unique_ptr<GrammarMatcher> VocabularyTrie::make_matcher(std::shared_ptr<const Grammar> grammar,
                                                             const std::vector<int32_t>& visible_control) const {
  if (!grammar) return nullptr;
  return std::make_unique<GrammarMatcher>(std::move(grammar), get(visible_control), tokenizer_.vocab().eog_ids());
}

int32_t sample_next(Sampler& sampler, GrammarMatcher* matcher, float* logits, int32_t n_vocab,
                    const std::vector<int32_t>& history, int64_t budget, int32_t also_allowed) {
  if (!matcher) return sampler.sample(logits, n_vocab, history);
  const bool extra = also_allowed >= 0 && also_allowed < n_vocab;
  const float extra_logit = extra ? logits[also_allowed] : 0.0f;
  const bool admits_any = matcher->apply(logits, n_vocab, budget);
  if (!admits_any && !extra) return -1;
  if (extra) logits[also_allowed] = extra_logit;
  const int32_t token = sampler.sample(logits, n_vocab, history);
  if (extra && token == also_allowed) return token;
  if (!matcher->accept(token)) return -1;
  return token;
}

}  // namespace autoglm
