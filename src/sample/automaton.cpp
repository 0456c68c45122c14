#include "sample/automaton.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>

namespace autoglm {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10ffff;
const CodeSet kSurrogates = {{0xd800, 0xdfff}};

CodeSet normalized(CodeSet s) {
  std::sort(s.begin(), s.end(), [](const CharRange& a, const CharRange& b) { return a.lo < b.lo; });
  CodeSet out;
  for (const CharRange& r : s) {
    if (!out.empty() && r.lo <= out.back().hi + 1)
      out.back().hi = std::max(out.back().hi, r.hi);
    else
      out.push_back(r);
  }
  return out;
}

}  // namespace

CodeSet code_set_union(CodeSet a, const CodeSet& b) {
  a.insert(a.end(), b.begin(), b.end());
  return normalized(std::move(a));
}

CodeSet code_set_complement(const CodeSet& a) {
  CodeSet in = code_set_union(a, kSurrogates), out;
  uint32_t next = 0;
  for (const CharRange& r : in) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

CodeSet code_set_minus(const CodeSet& a, const CodeSet& b) {
  CodeSet out;
  const CodeSet keep = code_set_complement(b);  // a ∩ ¬b
  for (const CharRange& x : a)
    for (const CharRange& y : keep)
      if (x.lo <= y.hi && y.lo <= x.hi) out.push_back({std::max(x.lo, y.lo), std::min(x.hi, y.hi)});
  return normalized(std::move(out));
}

bool code_set_contains(const CodeSet& a, uint32_t c) {
  for (const CharRange& r : a)
    if (c >= r.lo && c <= r.hi) return true;
  return false;
}

namespace {

// The states reachable from `states` by epsilon moves, sorted. Each state visited and each
// move looked at is a step.
std::vector<int32_t> closure(const Nfa& nfa, std::vector<int32_t> states, AutomatonBudget& budget) {
  std::vector<bool> seen(nfa.states.size(), false);
  for (int32_t s : states) seen[size_t(s)] = true;
  for (size_t i = 0; i < states.size(); ++i) {
    const std::vector<int32_t>& moves = nfa.states[size_t(states[i])].epsilon;
    budget.spend(1 + moves.size());
    for (int32_t e : moves)
      if (!seen[size_t(e)]) seen[size_t(e)] = true, states.push_back(e);
  }
  std::sort(states.begin(), states.end());
  return states;
}

// The points where some range starts or ends: between two consecutive points every
// range either covers all code points or none.
std::vector<uint32_t> boundaries(const std::vector<const CodeSet*>& sets) {
  std::vector<uint32_t> points;
  for (const CodeSet* s : sets)
    for (const CharRange& r : *s) points.push_back(r.lo), points.push_back(r.hi + 1);
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  return points;
}

// Binary search: a label can have thousands of ranges, and every interval asks.
bool label_contains(const CodeSet& set, uint32_t c) {
  auto it = std::upper_bound(set.begin(), set.end(), c, [](uint32_t v, const CharRange& r) { return v < r.lo; });
  return it != set.begin() && c <= std::prev(it)->hi;
}

void add_edge(std::vector<Dfa::Edge>& edges, uint32_t lo, uint32_t hi, int32_t target) {
  if (!edges.empty() && edges.back().target == target && edges.back().range.hi + 1 == lo)
    edges.back().range.hi = hi;
  else
    edges.push_back({{lo, hi}, target});
}

Status too_large(const std::string& what, size_t limit, const char* kind) {
  return invalid_argument(what + " needs more than " + std::to_string(limit) + " " + kind +
                          " states (simplify it or drop it)");
}

// The edges of one DFA state: for each interval between `points`, the closure of the
// labelled moves of `set` that cover it.
Result<std::vector<Dfa::Edge>> subset_edges(const Nfa& nfa, const std::vector<int32_t>& set,
                                            const std::function<int32_t(std::vector<int32_t>)>& id_of,
                                            AutomatonBudget& budget, const std::string& what) {
  std::vector<const CodeSet*> labels;
  for (int32_t s : set)
    if (nfa.states[size_t(s)].target >= 0) labels.push_back(&nfa.states[size_t(s)].label);
  const std::vector<uint32_t> points = boundaries(labels);
  budget.spend(set.size() + points.size());
  std::vector<Dfa::Edge> edges;
  for (size_t k = 0; k + 1 < points.size(); ++k) {
    budget.spend(labels.size());
    AUTOGLM_RETURN_IF_ERROR(budget.check(what));
    std::vector<int32_t> targets;
    for (int32_t s : set) {
      const Nfa::State& st = nfa.states[size_t(s)];
      if (st.target >= 0 && label_contains(st.label, points[k])) targets.push_back(st.target);
    }
    if (targets.empty()) continue;
    add_edge(edges, points[k], points[k + 1] - 1, id_of(closure(nfa, std::move(targets), budget)));
  }
  return edges;
}

// The target of `s` on `c`, with `at` the index of the first edge that may still hold it:
// the callers ask in increasing `c`, so one state's edges are walked once, not per point.
int32_t step_forward(const Dfa& d, int32_t s, uint32_t c, size_t& at) {
  if (s < 0) return -1;
  const std::vector<Dfa::Edge>& edges = d.states[size_t(s)].edges;
  while (at < edges.size() && edges[at].range.hi < c) ++at;
  return at < edges.size() && edges[at].range.lo <= c ? edges[at].target : -1;
}

}  // namespace

Status AutomatonBudget::check(const std::string& what) const {
  if (steps_ <= limits_.max_steps) return Status::ok();
  return invalid_argument(
      what + " needs more than " + std::to_string(limits_.max_steps) +
      " steps to build its automaton (a schema's automata share them; repetitions inside repetitions "
      "multiply them: simplify it)");
}

Result<Dfa> determinize(const Nfa& nfa, AutomatonBudget& budget, const std::string& what) {
  const AutomatonLimits& limits = budget.limits();
  if (nfa.states.size() > limits.max_nfa_states) return too_large(what, limits.max_nfa_states, "automaton");
  Dfa dfa;
  std::map<std::vector<int32_t>, int32_t> ids;
  // The sets waiting for their edges, as the map's own keys (map nodes never move): a copy
  // would double the memory, which is the subset construction's largest cost.
  std::vector<const std::vector<int32_t>*> pending;
  auto id_of = [&](std::vector<int32_t> set) {
    auto [it, fresh] = ids.try_emplace(std::move(set), int32_t(dfa.states.size()));
    if (fresh) {
      dfa.states.emplace_back();
      dfa.states.back().accepting = std::binary_search(it->first.begin(), it->first.end(), nfa.accept);
      pending.push_back(&it->first);
    }
    return it->second;
  };
  id_of(closure(nfa, {0}, budget));
  for (size_t next = 0; next < pending.size(); ++next) {
    if (dfa.states.size() > limits.max_dfa_states) return too_large(what, limits.max_dfa_states, "automaton");
    AUTOGLM_ASSIGN_OR_RETURN(std::vector<Dfa::Edge> edges, subset_edges(nfa, *pending[next], id_of, budget, what));
    dfa.states[next].edges = std::move(edges);
  }
  AUTOGLM_RETURN_IF_ERROR(budget.check(what));
  return trim(dfa);
}

Result<Dfa> combine(const Dfa& a, const Dfa& b, Combine how, AutomatonBudget& budget, const std::string& what) {
  const AutomatonLimits& limits = budget.limits();
  Dfa out;
  std::map<std::pair<int32_t, int32_t>, int32_t> ids;
  std::vector<std::pair<int32_t, int32_t>> pending;
  auto accepts = [](const Dfa& d, int32_t s) { return s >= 0 && d.states[size_t(s)].accepting; };
  auto alive = [&](int32_t x, int32_t y) {
    return how == Combine::kBoth ? x >= 0 && y >= 0 : how == Combine::kFirstOnly ? x >= 0 : x >= 0 || y >= 0;
  };
  auto id_of = [&](std::pair<int32_t, int32_t> pair) {
    auto [it, fresh] = ids.try_emplace(pair, int32_t(out.states.size()));
    if (fresh) {
      const bool in_a = accepts(a, pair.first), in_b = accepts(b, pair.second);
      out.states.emplace_back();
      out.states.back().accepting = how == Combine::kBoth     ? in_a && in_b
                                    : how == Combine::kEither ? in_a || in_b
                                                              : in_a && !in_b;
      pending.push_back(pair);
    }
    return it->second;
  };
  auto start = [](const Dfa& d) { return d.states.empty() ? -1 : 0; };
  if (!alive(start(a), start(b))) return Dfa{};
  id_of({start(a), start(b)});
  for (size_t next = 0; next < pending.size(); ++next) {
    if (out.states.size() > limits.max_dfa_states) return too_large(what, limits.max_dfa_states, "automaton");
    const auto [x, y] = pending[next];
    CodeSet xs, ys;
    if (x >= 0)
      for (const Dfa::Edge& e : a.states[size_t(x)].edges) xs.push_back(e.range);
    if (y >= 0)
      for (const Dfa::Edge& e : b.states[size_t(y)].edges) ys.push_back(e.range);
    const std::vector<uint32_t> points = boundaries({&xs, &ys});
    budget.spend(1 + 2 * points.size() + xs.size() + ys.size());
    AUTOGLM_RETURN_IF_ERROR(budget.check(what));
    std::vector<Dfa::Edge> edges;
    size_t at_x = 0, at_y = 0;
    for (size_t k = 0; k + 1 < points.size(); ++k) {
      const int32_t nx = step_forward(a, x, points[k], at_x), ny = step_forward(b, y, points[k], at_y);
      if (alive(nx, ny)) add_edge(edges, points[k], points[k + 1] - 1, id_of({nx, ny}));
    }
    out.states[next].edges = std::move(edges);
  }
  return trim(out);
}

// Linear in states and edges: usefulness spreads backwards along reversed edges from the
// accepting states (a fixed-point sweep took one sweep per state of a chain: n^2).
Dfa trim(const Dfa& dfa) {
  const size_t n = dfa.states.size();
  if (n == 0) return dfa;
  std::vector<bool> reached(n, false), useful(n, false);
  std::vector<int32_t> order = {0};
  reached[0] = true;
  for (size_t i = 0; i < order.size(); ++i)
    for (const Dfa::Edge& e : dfa.states[size_t(order[i])].edges)
      if (!reached[size_t(e.target)]) reached[size_t(e.target)] = true, order.push_back(e.target);
  // The reversed edges in two flat arrays: the sources of t are sources[first[t], first[t + 1]).
  std::vector<uint32_t> first(n + 1, 0);  // edges are far fewer than 2^32 (the step budget)
  for (const Dfa::State& st : dfa.states)
    for (const Dfa::Edge& e : st.edges) ++first[size_t(e.target) + 1];
  for (size_t t = 0; t < n; ++t) first[t + 1] += first[t];
  std::vector<int32_t> sources(first[n]);
  std::vector<uint32_t> fill(first.begin(), first.end() - 1);
  std::vector<int32_t> todo;
  for (size_t s = 0; s < n; ++s) {
    for (const Dfa::Edge& e : dfa.states[s].edges) sources[fill[size_t(e.target)]++] = int32_t(s);
    if (dfa.states[s].accepting) useful[s] = true, todo.push_back(int32_t(s));
  }
  while (!todo.empty()) {
    const size_t t = size_t(todo.back());
    todo.pop_back();
    for (uint32_t k = first[t]; k < first[t + 1]; ++k)
      if (!useful[size_t(sources[k])]) useful[size_t(sources[k])] = true, todo.push_back(sources[k]);
  }
  if (!useful[0]) return Dfa{};
  std::vector<int32_t> renumber(n, -1);
  Dfa out;
  for (int32_t s : order)
    if (useful[size_t(s)]) renumber[size_t(s)] = int32_t(out.states.size()), out.states.emplace_back();
  for (int32_t s : order) {
    if (!useful[size_t(s)]) continue;
    Dfa::State& to = out.states[size_t(renumber[size_t(s)])];
    to.accepting = dfa.states[size_t(s)].accepting;
    for (const Dfa::Edge& e : dfa.states[size_t(s)].edges)
      if (useful[size_t(e.target)]) to.edges.push_back({e.range, renumber[size_t(e.target)]});
  }
  return out;
}

bool dfa_matches(const Dfa& dfa, const std::u32string& text) {
  if (dfa.states.empty()) return false;
  int32_t s = 0;
  for (char32_t c : text) {
    int32_t next = -1;
    for (const Dfa::Edge& e : dfa.states[size_t(s)].edges)
      if (uint32_t(c) >= e.range.lo && uint32_t(c) <= e.range.hi) next = e.target;
    if (next < 0) return false;
    s = next;
  }
  return dfa.states[size_t(s)].accepting;
}

}  // namespace autoglm
