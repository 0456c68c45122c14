// Which tokens may come next under a grammar. The vocabulary's byte strings sit in a trie;
// one walk of the trie, advancing the grammar byte by byte and pruning where it dies, marks
// every admissible token at once (tokens that span several grammar symbols or end inside a
// UTF-8 character included). A state's mask is cached, so a repeated state costs a lookup.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "sample/grammar.h"

namespace autoglm {

class TokenTrie {
 public:
  // token_bytes[id]: the bytes token id stands for; empty: never admissible (control tokens).
  explicit TokenTrie(const std::vector<std::string>& token_bytes);
  int32_t n_vocab() const { return n_vocab_; }
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }

 private:
  friend class GrammarMatcher;
  struct Edge {
    uint8_t byte;
    int32_t child;
  };
  // Compressed rows, nodes numbered depth first: a node's edges are
  // edges_[edge_begin_[n], edge_begin_[n + 1]), its tokens token_ids_[token_begin_[n], token_begin_[n + 1]).
  std::vector<int32_t> edge_begin_;
  std::vector<Edge> edges_;
  std::vector<int32_t> token_begin_;
  std::vector<int32_t> token_ids_;
  std::vector<std::string> bytes_;
  int32_t n_vocab_ = 0;
};

class GrammarMatcher {
 public:
  // eog: the end-of-generation ids, admissible once the text is a whole sentence.
  GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                 std::vector<int32_t> eog);

  // Sets every inadmissible logit to -inf; false when nothing at all is admissible.
  // `budget`: tokens left for this text (-1: unlimited). Near the end of the budget only
  // tokens after which the text can still be completed, end token included, remain, so a
  // bounded generation ends in a whole sentence rather than being cut off.
  bool apply(float* logits, int32_t n_vocab, int64_t budget = -1);
  // Moves past `token` (its bytes are the trie's); false (state unchanged) if the grammar
  // does not admit it.
  bool accept(int32_t token);

  bool accepting() const { return states_[size_t(current_)].state.accepting(); }
  // The text is complete and nothing may follow it.
  bool finished() const { return accepting() && !states_[size_t(current_)].state.can_continue(); }

  // Masks built so far (a state's mask is built once, then looked up).
  int64_t masks_built() const { return masks_built_; }

 private:
  using Bits = std::vector<uint64_t>;
  // Grammar states met so far, with their byte transitions filled in as they are taken
  // (-2 not computed yet, -1 dead): a trie walk then costs one table lookup per node once
  // the states are known. Transitions live in blocks of states, so growing never copies them.
  struct Interned {
    GrammarState state;
    int32_t distance = -1;  // distance_to_accept, once asked
    std::shared_ptr<const Bits> mask;
  };
  int32_t intern(GrammarState state);
  int32_t step(int32_t id, uint8_t byte);
  int32_t step_bytes(int32_t id, const std::string& bytes);
  int32_t distance(int32_t id);
  const Bits& mask();
  void collect(int32_t node, int32_t state, Bits& bits);
  void keep_completable(float* logits, int32_t n_vocab, int64_t budget);
  void reset_if_large();

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<int32_t> eog_;
  std::vector<Interned> states_;
  static constexpr int32_t kStatesPerBlock = 256;
  int32_t& transition(int32_t state, uint8_t byte) {
    return next_blocks_[size_t(state / kStatesPerBlock)][size_t(state % kStatesPerBlock) * 256 + byte];
  }
  std::vector<std::unique_ptr<int32_t[]>> next_blocks_;
  std::unordered_map<std::string, int32_t> ids_;
  int32_t current_ = 0;
  int64_t masks_built_ = 0;
};

}  // namespace autoglm
