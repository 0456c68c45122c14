#include "sample/token_mask.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace autoglm {
namespace {

constexpr size_t kMaxCachedMasks = 4096;
// Within this many tokens of the budget's end each admissible token is checked for whether
// the text can still be completed after it (a token adds at most a few characters to close).
constexpr int64_t kClosingMargin = 64;

bool test_bit(const std::vector<uint64_t>& bits, int32_t id) {
  return (bits[size_t(id) >> 6] >> (id & 63)) & 1;
}

}  // namespace

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes)
    : bytes_(token_bytes), n_vocab_(int32_t(token_bytes.size())) {
  nodes_.emplace_back();
  for (int32_t id = 0; id < n_vocab_; ++id) {
    const std::string& bytes = token_bytes[size_t(id)];
    if (bytes.empty()) continue;
    int32_t node = 0;
    for (char c : bytes) {
      const auto b = static_cast<uint8_t>(c);
      auto& children = nodes_[size_t(node)].children;
      auto it = std::find_if(children.begin(), children.end(), [&](const auto& e) { return e.first == b; });
      if (it != children.end()) {
        node = it->second;
      } else {
        const int32_t next = int32_t(nodes_.size());
        nodes_[size_t(node)].children.emplace_back(b, next);
        nodes_.emplace_back();
        node = next;
      }
    }
    nodes_[size_t(node)].tokens.push_back(id);
  }
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                               std::vector<int32_t> eog)
    : trie_(std::move(trie)), eog_(std::move(eog)), state_(std::move(grammar)) {}

void GrammarMatcher::collect(int32_t node, const GrammarState& state, Bits& bits) const {
  for (const auto& [byte, child] : trie_->nodes_[size_t(node)].children) {
    const GrammarState next = state.advance_byte(byte);
    if (next.dead()) continue;
    for (int32_t id : trie_->nodes_[size_t(child)].tokens) bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
    collect(child, next, bits);
  }
}

const GrammarMatcher::Bits& GrammarMatcher::mask() {
  const std::string key = state_.key();
  if (auto it = cache_.find(key); it != cache_.end()) {
    ++masks_cached_;
    return it->second;
  }
  const auto start = std::chrono::steady_clock::now();
  Bits bits(size_t(trie_->n_vocab() + 63) / 64, 0);
  if (state_.can_continue()) collect(0, state_, bits);
  if (state_.accepting())
    for (int32_t id : eog_)
      if (id >= 0 && id < trie_->n_vocab()) bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
  mask_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++masks_built_;
  if (cache_.size() >= kMaxCachedMasks) cache_.clear();
  return cache_.emplace(key, std::move(bits)).first->second;
}

bool GrammarMatcher::apply(float* logits, int32_t n_vocab, int64_t budget) {
  const Bits& bits = mask();
  bool any = false;
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (id < trie_->n_vocab() && test_bit(bits, id))
      any = true;
    else
      logits[id] = -INFINITY;
  }
  if (any && budget >= 0 && budget <= state_.distance_to_accept() + kClosingMargin)
    keep_completable(logits, n_vocab, budget);
  return any;
}

// Leaves the tokens after which the rest of the budget still fits the shortest completion
// plus an end token (a token is at least one character, so the distance bounds the tokens).
void GrammarMatcher::keep_completable(float* logits, int32_t n_vocab, int64_t budget) const {
  std::vector<int32_t> dropped;
  bool kept = false;
  for (int32_t id = 0; id < std::min(n_vocab, trie_->n_vocab()); ++id) {
    if (std::isinf(logits[id])) continue;
    if (std::find(eog_.begin(), eog_.end(), id) != eog_.end()) {
      kept = true;
      continue;
    }
    const GrammarState next = state_.advance_bytes(trie_->bytes(id));
    if (next.dead() || next.distance_to_accept() > budget - 2)
      dropped.push_back(id);
    else
      kept = true;
  }
  if (kept)  // otherwise keep the plain mask: nothing completes in time anyway
    for (int32_t id : dropped) logits[id] = -INFINITY;
}

bool GrammarMatcher::accept(int32_t token, const std::string& bytes) {
  if (std::find(eog_.begin(), eog_.end(), token) != eog_.end()) return state_.accepting();
  if (bytes.empty()) return false;
  GrammarState next = state_.advance_bytes(bytes);
  if (next.dead()) return false;
  state_ = std::move(next);
  return true;
}

}  // namespace autoglm
