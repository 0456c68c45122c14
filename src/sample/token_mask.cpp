#include "sample/token_mask.h"

#include <algorithm>
#include <cmath>

namespace autoglm {
namespace {

constexpr size_t kMaxInternedStates = 200000;
// Within this many tokens of the budget's end each admissible token is checked for whether
// the text can still be completed after it (a token adds at most a few characters to close).
constexpr int64_t kClosingMargin = 64;

}  // namespace

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes)
    : bytes_(token_bytes), n_vocab_(int32_t(token_bytes.size())) {
  // A plain tree first, then laid out depth first in compressed rows (the walk's hot data).
  struct Building {
    std::vector<std::pair<uint8_t, int32_t>> children;
    std::vector<int32_t> tokens;
  };
  std::vector<Building> tree(1);
  for (int32_t id = 0; id < n_vocab_; ++id) {
    const std::string& bytes = token_bytes[size_t(id)];
    if (bytes.empty()) continue;
    int32_t node = 0;
    for (char c : bytes) {
      const auto b = static_cast<uint8_t>(c);
      auto& children = tree[size_t(node)].children;
      auto it = std::find_if(children.begin(), children.end(), [&](const auto& e) { return e.first == b; });
      if (it != children.end()) {
        node = it->second;
      } else {
        const int32_t next = int32_t(tree.size());
        tree[size_t(node)].children.emplace_back(b, next);
        tree.emplace_back();
        node = next;
      }
    }
    tree[size_t(node)].tokens.push_back(id);
  }
  std::vector<int32_t> order, number(tree.size());  // preorder
  std::vector<int32_t> todo = {0};
  while (!todo.empty()) {
    const int32_t n = todo.back();
    todo.pop_back();
    number[size_t(n)] = int32_t(order.size());
    order.push_back(n);
    const auto& ch = tree[size_t(n)].children;
    for (auto it = ch.rbegin(); it != ch.rend(); ++it) todo.push_back(it->second);
  }
  for (int32_t n : order) {
    edge_begin_.push_back(int32_t(edges_.size()));
    for (const auto& [b, child] : tree[size_t(n)].children) edges_.push_back({b, number[size_t(child)]});
    token_begin_.push_back(int32_t(token_ids_.size()));
    for (int32_t id : tree[size_t(n)].tokens) token_ids_.push_back(id);
  }
  edge_begin_.push_back(int32_t(edges_.size()));
  token_begin_.push_back(int32_t(token_ids_.size()));
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                               std::vector<int32_t> eog)
    : grammar_(std::move(grammar)), trie_(std::move(trie)), eog_(std::move(eog)) {
  current_ = intern(GrammarState(grammar_));
}

int32_t GrammarMatcher::intern(GrammarState state) {
  if (state.dead()) return -1;
  std::string key = state.key();
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  const int32_t id = int32_t(states_.size());
  states_.push_back({std::move(state), -1, nullptr});
  if (id % kStatesPerBlock == 0) {
    next_blocks_.emplace_back(new int32_t[size_t(kStatesPerBlock) * 256]);
    std::fill_n(next_blocks_.back().get(), size_t(kStatesPerBlock) * 256, -2);
  }
  ids_.emplace(std::move(key), id);
  return id;
}

int32_t GrammarMatcher::step(int32_t id, uint8_t byte) {
  int32_t next = transition(id, byte);
  if (next == -2) {
    next = intern(states_[size_t(id)].state.advance_byte(byte));
    transition(id, byte) = next;
  }
  return next;
}

int32_t GrammarMatcher::step_bytes(int32_t id, const std::string& bytes) {
  for (char b : bytes) {
    id = step(id, static_cast<uint8_t>(b));
    if (id < 0) break;
  }
  return id;
}

int32_t GrammarMatcher::distance(int32_t id) {
  Interned& s = states_[size_t(id)];
  if (s.distance < 0) s.distance = s.state.distance_to_accept();
  return s.distance;
}

void GrammarMatcher::collect(int32_t node, int32_t state, Bits& bits) {
  const TokenTrie& t = *trie_;
  for (int32_t e = t.edge_begin_[size_t(node)]; e < t.edge_begin_[size_t(node) + 1]; ++e) {
    const TokenTrie::Edge edge = t.edges_[size_t(e)];
    const int32_t next = step(state, edge.byte);
    if (next < 0) continue;
    for (int32_t k = t.token_begin_[size_t(edge.child)]; k < t.token_begin_[size_t(edge.child) + 1]; ++k) {
      const int32_t id = t.token_ids_[size_t(k)];
      bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
    }
    collect(edge.child, next, bits);
  }
}

// Interned states only grow; a long-running matcher starts afresh past a bound.
void GrammarMatcher::reset_if_large() {
  if (states_.size() < kMaxInternedStates) return;
  GrammarState keep = states_[size_t(current_)].state;
  states_.clear();
  next_blocks_.clear();
  ids_.clear();
  current_ = intern(std::move(keep));
}

const GrammarMatcher::Bits& GrammarMatcher::mask() {
  reset_if_large();
  if (auto cached = states_[size_t(current_)].mask) return *cached;
  auto bits = std::make_shared<Bits>(size_t(trie_->n_vocab() + 63) / 64, 0);
  const int32_t at = current_;
  if (states_[size_t(at)].state.can_continue()) collect(0, at, *bits);
  if (states_[size_t(at)].state.accepting())
    for (int32_t id : eog_)
      if (id >= 0 && id < trie_->n_vocab()) (*bits)[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
  ++masks_built_;
  states_[size_t(at)].mask = bits;
  return *bits;
}

bool GrammarMatcher::apply(float* logits, int32_t n_vocab, int64_t budget) {
  const Bits& bits = mask();
  bool any = false;
  const int32_t covered = std::min(n_vocab, trie_->n_vocab());
  for (int32_t base = 0; base < covered; base += 64) {  // a word of the mask at a time
    const uint64_t word = bits[size_t(base) >> 6];
    any = any || word != 0;
    if (word == ~uint64_t(0)) continue;
    const int32_t end = std::min(base + 64, covered);
    for (int32_t id = base; id < end; ++id)
      if (!((word >> (id - base)) & 1)) logits[id] = -INFINITY;
  }
  for (int32_t id = covered; id < n_vocab; ++id) logits[id] = -INFINITY;
  if (any && budget >= 0 && budget <= distance(current_) + kClosingMargin) keep_completable(logits, n_vocab, budget);
  return any;
}

// Leaves the tokens after which the rest of the budget still fits the shortest completion
// plus an end token (a token is at least one character, so the distance bounds the tokens).
void GrammarMatcher::keep_completable(float* logits, int32_t n_vocab, int64_t budget) {
  std::vector<int32_t> dropped;
  bool kept = false;
  for (int32_t id = 0; id < std::min(n_vocab, trie_->n_vocab()); ++id) {
    if (std::isinf(logits[id])) continue;
    if (std::find(eog_.begin(), eog_.end(), id) != eog_.end()) {
      kept = true;
      continue;
    }
    const int32_t next = step_bytes(current_, trie_->bytes(id));
    if (next < 0 || distance(next) > budget - 2)
      dropped.push_back(id);
    else
      kept = true;
  }
  if (kept)  // otherwise keep the plain mask: nothing completes in time anyway
    for (int32_t id : dropped) logits[id] = -INFINITY;
}

bool GrammarMatcher::accept(int32_t token) {
  if (std::find(eog_.begin(), eog_.end(), token) != eog_.end()) return accepting();
  if (token < 0 || token >= trie_->n_vocab() || trie_->bytes(token).empty()) return false;
  const int32_t next = step_bytes(current_, trie_->bytes(token));
  if (next < 0) return false;
  current_ = next;
  return true;
}

}  // namespace autoglm
