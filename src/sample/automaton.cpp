#include "sample/automaton.h"

#include <algorithm>
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

std::vector<int32_t> closure(const Nfa& nfa, std::vector<int32_t> states) {
  std::vector<bool> seen(nfa.states.size(), false);
  for (int32_t s : states) seen[size_t(s)] = true;
  for (size_t i = 0; i < states.size(); ++i)
    for (int32_t e : nfa.states[size_t(states[i])].epsilon)
      if (!seen[size_t(e)]) seen[size_t(e)] = true, states.push_back(e);
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

}  // namespace

Result<Dfa> determinize(const Nfa& nfa, const AutomatonLimits& limits, const std::string& what) {
  if (nfa.states.size() > limits.max_nfa_states) return too_large(what, limits.max_nfa_states, "automaton");
  Dfa dfa;
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> pending;
  auto id_of = [&](std::vector<int32_t> set) {
    auto [it, fresh] = ids.try_emplace(std::move(set), int32_t(dfa.states.size()));
    if (fresh) {
      dfa.states.emplace_back();
      dfa.states.back().accepting = std::binary_search(it->first.begin(), it->first.end(), nfa.accept);
      pending.push_back(it->first);
    }
    return it->second;
  };
  id_of(closure(nfa, {0}));
  for (size_t next = 0; next < pending.size(); ++next) {
    if (dfa.states.size() > limits.max_dfa_states) return too_large(what, limits.max_dfa_states, "automaton");
    const std::vector<int32_t> set = pending[next];
    std::vector<const CodeSet*> labels;
    for (int32_t s : set)
      if (nfa.states[size_t(s)].target >= 0) labels.push_back(&nfa.states[size_t(s)].label);
    const std::vector<uint32_t> points = boundaries(labels);
    std::vector<Dfa::Edge> edges;
    for (size_t k = 0; k + 1 < points.size(); ++k) {
      std::vector<int32_t> targets;
      for (int32_t s : set) {
        const Nfa::State& st = nfa.states[size_t(s)];
        if (st.target >= 0 && code_set_contains(st.label, points[k])) targets.push_back(st.target);
      }
      if (targets.empty()) continue;
      add_edge(edges, points[k], points[k + 1] - 1, id_of(closure(nfa, std::move(targets))));
    }
    dfa.states[next].edges = std::move(edges);
  }
  return trim(dfa);
}

Result<Dfa> combine(const Dfa& a, const Dfa& b, Combine how, const AutomatonLimits& limits, const std::string& what) {
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
    auto step = [](const Dfa& d, int32_t s, uint32_t c) {
      if (s < 0) return -1;
      for (const Dfa::Edge& e : d.states[size_t(s)].edges)
        if (c >= e.range.lo && c <= e.range.hi) return e.target;
      return -1;
    };
    std::vector<Dfa::Edge> edges;
    for (size_t k = 0; k + 1 < points.size(); ++k) {
      const int32_t nx = step(a, x, points[k]), ny = step(b, y, points[k]);
      if (alive(nx, ny)) add_edge(edges, points[k], points[k + 1] - 1, id_of({nx, ny}));
    }
    out.states[next].edges = std::move(edges);
  }
  return trim(out);
}

Dfa trim(const Dfa& dfa) {
  const size_t n = dfa.states.size();
  if (n == 0) return dfa;
  std::vector<bool> reached(n, false), useful(n, false);
  std::vector<int32_t> order = {0};
  reached[0] = true;
  for (size_t i = 0; i < order.size(); ++i)
    for (const Dfa::Edge& e : dfa.states[size_t(order[i])].edges)
      if (!reached[size_t(e.target)]) reached[size_t(e.target)] = true, order.push_back(e.target);
  for (size_t s = 0; s < n; ++s) useful[s] = dfa.states[s].accepting;
  for (bool changed = true; changed;) {  // backwards to a fixed point
    changed = false;
    for (size_t s = 0; s < n; ++s)
      if (!useful[s])
        for (const Dfa::Edge& e : dfa.states[s].edges)
          if (useful[size_t(e.target)]) {
            useful[s] = changed = true;
            break;
          }
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
