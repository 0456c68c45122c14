// The merge loop shared by the SPM and BPE tokenizers: a text split into UTF-8
// characters as a linked list of symbols; the adjacent pair with the best priority
// is merged again and again (leftmost first on ties) until no pair may merge.
#pragma once

#include <optional>
#include <queue>
#include <string>
#include <vector>

#include "core/utf8.h"

namespace autoglm {

struct MergeSymbol {
  int prev;
  int next;
  size_t start;
  size_t len;  // 0 once merged into its left neighbour
};

// priority(start, len_left, len_right) -> optional<double>: higher merges first; nullopt: never.
template <typename Priority>
std::vector<MergeSymbol> merge_symbols(const std::string& text, Priority priority) {
  std::vector<MergeSymbol> symbols;
  for (size_t offs = 0; offs < text.size();) {
    const size_t len = std::min(text.size() - offs, utf8::sequence_length(static_cast<unsigned char>(text[offs])));
    const int index = int(symbols.size());
    symbols.push_back({index - 1, offs + len < text.size() ? index + 1 : -1, offs, len});
    offs += len;
  }
  struct Pair {
    double priority;
    int left, right;
    size_t len;
    bool operator<(const Pair& o) const { return priority < o.priority || (priority == o.priority && left > o.left); }
  };
  std::priority_queue<Pair> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const MergeSymbol& l = symbols[size_t(left)];
    const MergeSymbol& r = symbols[size_t(right)];
    if (const std::optional<double> p = priority(l.start, l.len, r.len)) queue.push({*p, left, right, l.len + r.len});
  };
  for (int i = 1; i < int(symbols.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    MergeSymbol& left = symbols[size_t(p.left)];
    MergeSymbol& right = symbols[size_t(p.right)];
    if (left.len == 0 || right.len == 0 || left.len + right.len != p.len) continue;  // stale pair
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[size_t(right.next)].prev = p.left;
    try_add(left.prev, p.left);
    try_add(p.left, left.next);
  }
  return symbols;
}

// Calls fn(start, len) for each symbol left after merging, in text order.
template <typename Fn>
void for_each_symbol(const std::vector<MergeSymbol>& symbols, Fn fn) {
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[size_t(i)].next)
    fn(symbols[size_t(i)].start, symbols[size_t(i)].len);
}

}  // namespace autoglm
