#include "sample/token_mask.h"

#include <algorithm>
#include <cmath>

namespace autoglm {
namespace {

constexpr size_t kMaxInternedStates = 200000;

// Bytes that UTF-8 text can hold (C0, C1 and F5-FF never appear).
bool utf8_byte(int b) {
  return b < 0xc0 || (b >= 0xc2 && b <= 0xf4);
}

int32_t plus_one(int32_t tokens) {
  return tokens >= (1 << 30) - 1 ? (1 << 30) : tokens + 1;
}

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
  std::vector<bool> single(256, false);
  for (const std::string& b : bytes_)
    if (b.size() == 1) single[static_cast<uint8_t>(b[0])] = true;
  spells_every_byte_ = true;
  for (int b = 0; b < 256; ++b) spells_every_byte_ = spells_every_byte_ && (single[size_t(b)] || !utf8_byte(b));
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                               std::vector<int32_t> eog)
    : grammar_(std::move(grammar)), trie_(std::move(trie)), eog_(std::move(eog)) {
  for (int32_t id : eog_) has_end_ = has_end_ || (id >= 0 && id < trie_->n_vocab());
  current_ = intern(GrammarState(grammar_));
}

int32_t GrammarMatcher::intern(GrammarState state) {
  if (state.dead()) return -1;
  std::string key = state.key();
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  const int32_t id = int32_t(states_.size());
  states_.emplace_back(std::move(state));
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

int32_t GrammarMatcher::bytes_to_end(int32_t id) {
  Interned& s = states_[size_t(id)];
  if (s.bytes < 0) s.bytes = s.state.distance_to_accept();
  return s.bytes;
}

// Marks the tokens admissible from `state` below trie `node` (into `bits`, when given) and
// adds the states they lead to to found_ (once each, by seen_).
void GrammarMatcher::walk(int32_t node, int32_t state, Bits* bits) {
  const TokenTrie& t = *trie_;
  for (int32_t e = t.edge_begin_[size_t(node)]; e < t.edge_begin_[size_t(node) + 1]; ++e) {
    const TokenTrie::Edge edge = t.edges_[size_t(e)];
    const int32_t next = step(state, edge.byte);
    if (next < 0) continue;
    const int32_t first = t.token_begin_[size_t(edge.child)], last = t.token_begin_[size_t(edge.child) + 1];
    if (first < last && seen_.mark(next)) found_.push_back(next);
    if (bits)
      for (int32_t k = first; k < last; ++k) {
        const int32_t id = t.token_ids_[size_t(k)];
        (*bits)[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
      }
    walk(edge.child, next, bits);
  }
}

// One walk of the trie from `id`: the states its tokens lead to (and its mask, when asked).
void GrammarMatcher::expand(int32_t id, Bits* bits) {
  found_.clear();
  seen_.clear();
  if (states_[size_t(id)].state.can_continue()) walk(0, id, bits);
  Interned& s = states_[size_t(id)];
  s.next = found_;
  s.expanded = true;
}

const std::vector<int32_t>& GrammarMatcher::successors(int32_t id) {
  if (!states_[size_t(id)].expanded) expand(id, nullptr);
  return states_[size_t(id)].next;
}

void GrammarMatcher::StateMarks::clear() {
  if (++epoch_ == 0) {  // wrapped: forget every mark
    std::fill(epochs_.begin(), epochs_.end(), 0);
    epoch_ = 1;
  }
}

bool GrammarMatcher::StateMarks::mark(int32_t id) {
  if (epochs_.size() <= size_t(id)) epochs_.resize(2 * size_t(id) + 64, 0);
  if (epochs_[size_t(id)] == epoch_) return false;
  epochs_[size_t(id)] = epoch_;
  return true;
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
  expand(at, bits.get());
  int32_t max_next = 0;
  for (int32_t next : states_[size_t(at)].next) max_next = std::max(max_next, bytes_to_end(next));
  states_[size_t(at)].max_next_bytes = max_next;
  if (states_[size_t(at)].state.accepting())
    for (int32_t id : eog_)
      if (id >= 0 && id < trie_->n_vocab()) (*bits)[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
  ++masks_built_;
  states_[size_t(at)].mask = bits;
  return *bits;
}

// The fewest tokens from `id` to a whole sentence, the end token aside (kFar: none found). A
// shortest path over the states, each token an edge, taken along tokens that leave fewer bytes
// to write: the states then form a DAG, settled depth first without recursion. (A token that
// adds to what is left to write is not on a shortest way in practice; a byte the way needs is
// in every vocabulary with byte tokens.) Without `may_walk`, -1 rather than walk the trie for
// a state not walked yet.
int32_t GrammarMatcher::tokens_to_end(int32_t id, bool may_walk) {
  work_.assign(1, id);
  while (!work_.empty()) {
    const int32_t x = work_.back();
    if (states_[size_t(x)].tokens >= 0) {
      work_.pop_back();
      continue;
    }
    if (!may_walk && needs_walk(x)) return -1;  // counted later, if asked again
    int32_t best = kFar;
    if (!settle(x, best)) continue;  // its successors first
    states_[size_t(x)].tokens = best;
    work_.pop_back();
  }
  return states_[size_t(id)].tokens;
}

bool GrammarMatcher::needs_walk(int32_t id) const {
  const Interned& s = states_[size_t(id)];
  return !s.expanded && !s.state.accepting() && !(byte_bound() && s.state.pending_bytes() > 0);
}

// `best` for `id` from its successors' counts; false, with the unsettled ones pushed on
// work_, while some are missing.
bool GrammarMatcher::settle(int32_t id, int32_t& best) {
  if (states_[size_t(id)].state.accepting()) {
    best = 0;
    return true;
  }
  if (byte_bound() && states_[size_t(id)].state.pending_bytes() > 0) {
    // Inside a character: its next byte as a token of its own (tokens ending inside a
    // character are a thousand states in a byte-level vocabulary: no walk for each).
    const int32_t next = finish_character(id);
    const int32_t known = next < 0 ? kFar : states_[size_t(next)].tokens;
    if (known < 0) work_.push_back(next);
    best = known < 0 ? kFar : plus_one(known);
    return known >= 0;
  }
  const int32_t here = bytes_to_end(id);
  bool ready = true;
  for (int32_t next : successors(id)) {  // no state is interned below: the reference holds
    if (bytes_to_end(next) >= here) continue;
    const int32_t known = states_[size_t(next)].tokens;
    if (known < 0) {
      work_.push_back(next);
      ready = false;
    } else {
      best = std::min(best, plus_one(known));
    }
  }
  return ready;
}

// The state after the smallest continuation byte that brings an unfinished character one
// byte nearer to the end (one always does: the class admits some character with this prefix).
int32_t GrammarMatcher::finish_character(int32_t id) {
  const int32_t want = bytes_to_end(id) - 1;
  for (int b = 0x80; b < 0xc0; ++b) {
    const int32_t next = step(id, uint8_t(b));
    if (next >= 0 && bytes_to_end(next) == want) return next;
  }
  return -1;
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
  if (any && budget >= 0) keep_completable(logits, covered, budget);
  return any;
}

// Leaves the tokens after which a whole sentence still fits: `left` tokens after this one, the
// end token aside. Cheap while the end is far: the bytes left bound the tokens left. Near it,
// the current state's own count is always made, walking the trie as needed (some token then
// fits whenever the budget held at the start); the states other tokens lead to are counted
// only through states walked already (a walk per state would cost a mask each), and one that
// cannot be is left out unless its bytes fit.
void GrammarMatcher::keep_completable(float* logits, int32_t n_vocab, int64_t budget) {
  const int64_t left = budget - 1 - (has_end_ ? 1 : 0);
  const int32_t at = current_;
  if (byte_bound() && left >= states_[size_t(at)].max_next_bytes) return;
  tokens_to_end(at, /*may_walk=*/true);
  fit_.clear();
  bool all = true, some = has_end_ && states_[size_t(at)].state.accepting();  // the end token stays
  for (size_t i = 0; i < states_[size_t(at)].next.size(); ++i) {              // by index: counting interns states
    const int32_t next = states_[size_t(at)].next[i];
    const bool fits = fits_in(next, left);
    if (fits) fit_.mark(next);
    all = all && fits;
    some = some || fits;
  }
  if (!all && some) drop_late(0, at, logits, n_vocab);  // (nothing ends in time: the plain mask)
}

bool GrammarMatcher::fits_in(int32_t id, int64_t left) {
  if (byte_bound() && bytes_to_end(id) <= left) return true;
  const int32_t tokens = tokens_to_end(id, /*may_walk=*/false);
  return tokens >= 0 && tokens <= left;
}

// Drops the tokens that lead to states keep_completable did not mark.
void GrammarMatcher::drop_late(int32_t node, int32_t state, float* logits, int32_t n_vocab) {
  const TokenTrie& t = *trie_;
  for (int32_t e = t.edge_begin_[size_t(node)]; e < t.edge_begin_[size_t(node) + 1]; ++e) {
    const TokenTrie::Edge edge = t.edges_[size_t(e)];
    const int32_t next = transition(state, edge.byte);  // known: the mask's walk took it
    if (next < 0) continue;
    if (!fit_.marked(next))
      for (int32_t k = t.token_begin_[size_t(edge.child)]; k < t.token_begin_[size_t(edge.child) + 1]; ++k)
        if (t.token_ids_[size_t(k)] < n_vocab) logits[t.token_ids_[size_t(k)]] = -INFINITY;
    drop_late(edge.child, next, logits, n_vocab);
  }
}

int64_t GrammarMatcher::shortest_completion() {
  const int32_t tokens = tokens_to_end(current_, /*may_walk=*/true);
  return tokens >= kFar ? -1 : int64_t(tokens) + (has_end_ ? 1 : 0);
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
