// Which tokens may come next under a grammar. The vocabulary's byte strings sit in a trie;
// one walk of the trie, advancing the grammar byte by byte and pruning where it dies, marks
// every admissible token at once (tokens that span several grammar symbols or end inside a
// UTF-8 character included). A state's mask is cached, so a repeated state costs a lookup.
// Under a token budget the last stretch keeps only tokens after which the text can still be
// finished in time, counted in the vocabulary's own tokens (see GrammarMatcher::apply).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sample/grammar.h"

namespace autoglm {

class TokenTrie {
 public:
  // token_bytes[id]: the bytes token id stands for; empty: never admissible (control tokens).
  explicit TokenTrie(const std::vector<std::string>& token_bytes);
  int32_t n_vocab() const { return n_vocab_; }
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
  // Every byte that UTF-8 text can hold is a token of its own (byte-level BPE, SentencePiece
  // with byte fallback): any text can be spelled one byte per token.
  bool spells_every_byte() const { return spells_every_byte_; }

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
  bool spells_every_byte_ = false;
};

class GrammarMatcher {
 public:
  // eog: the end-of-generation ids, admissible once the text is a whole sentence.
  GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                 std::vector<int32_t> eog);

  // Sets every inadmissible logit to -inf; false when nothing at all is admissible.
  // `budget`: tokens left for this text, this one included (-1: unlimited). Only tokens t
  // with 1 + tokens_to_end(after t) + the end token <= budget remain (the end token counts
  // where the vocabulary has one), so given at least shortest_completion() tokens a
  // generation always ends in a whole sentence. When nothing fits, the plain mask stays.
  bool apply(float* logits, int32_t n_vocab, int64_t budget = -1);
  // The fewest of the vocabulary's tokens that make the text a whole sentence, the end token
  // included; -1 when no way is known.
  int64_t shortest_completion();
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
  static constexpr int32_t kFar = 1 << 30;  // no way to the end known
  // Grammar states met so far, with their byte transitions filled in as they are taken
  // (-2 not computed yet, -1 dead): a trie walk then costs one table lookup per node once
  // the states are known. Transitions live in blocks of states, so growing never copies them.
  // The rest is filled in when first asked.
  struct Interned {
    explicit Interned(GrammarState s) : state(std::move(s)) {}
    GrammarState state;
    int32_t bytes = -1;           // distance_to_accept
    int32_t tokens = -1;          // tokens_to_end
    int32_t max_next_bytes = -1;  // over `next` (with the mask)
    bool expanded = false;
    std::vector<int32_t> next;  // the distinct states its tokens lead to
    std::shared_ptr<const Bits> mask;
  };
  int32_t intern(GrammarState state);
  int32_t step(int32_t id, uint8_t byte);
  int32_t step_bytes(int32_t id, const std::string& bytes);
  int32_t bytes_to_end(int32_t id);
  const Bits& mask();
  void walk(int32_t node, int32_t state, Bits* bits);
  const std::vector<int32_t>& successors(int32_t id);
  void expand(int32_t id, Bits* bits);
  int32_t tokens_to_end(int32_t id, bool may_walk);
  bool needs_walk(int32_t id) const;
  bool settle(int32_t id, int32_t& best);
  int32_t finish_character(int32_t id);
  void keep_completable(float* logits, int32_t n_vocab, int64_t budget);
  bool fits_in(int32_t id, int64_t left);
  void drop_late(int32_t node, int32_t state, float* logits, int32_t n_vocab);
  void reset_if_large();

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<int32_t> eog_;
  bool has_end_ = false;  // an end token is in the vocabulary: the text's last token
  // Bytes to a sentence bound the tokens to it: the vocabulary spells every byte.
  bool byte_bound() const { return trie_->spells_every_byte(); }
  std::vector<Interned> states_;
  static constexpr int32_t kStatesPerBlock = 256;
  int32_t& transition(int32_t state, uint8_t byte) {
    return next_blocks_[size_t(state / kStatesPerBlock)][size_t(state % kStatesPerBlock) * 256 + byte];
  }
  std::vector<std::unique_ptr<int32_t[]>> next_blocks_;
  std::unordered_map<std::string, int32_t> ids_;
  int32_t current_ = 0;
  int64_t masks_built_ = 0;
  // A set of state ids, emptied in O(1) by moving to a new epoch (scratch kept between calls).
  class StateMarks {
   public:
    void clear();
    // Marks `id`; false when it was marked already.
    bool mark(int32_t id);
    bool marked(int32_t id) const { return size_t(id) < epochs_.size() && epochs_[size_t(id)] == epoch_; }

   private:
    std::vector<uint32_t> epochs_;
    uint32_t epoch_ = 0;
  };
  // Scratch, kept between calls: states seen in a walk, states that fit the budget, states
  // still to settle.
  StateMarks seen_, fit_;
  std::vector<int32_t> found_, work_;
};

}  // namespace autoglm
