// Finite automata over Unicode scalar values, the one mechanism behind JSON Schema's
// `pattern`, `format`, string lengths and number ranges: a regular expression becomes an
// NFA, the NFA a DFA, and DFAs combine by intersection, union and complement before one
// of them is written out as grammar rules (sample/automaton_gbnf.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "sample/grammar.h"

namespace autoglm {

// Sorted, disjoint, non-adjacent ranges of code points (surrogates never appear).
using CodeSet = std::vector<CharRange>;

CodeSet code_set_union(CodeSet a, const CodeSet& b);
CodeSet code_set_complement(const CodeSet& a);  // within the scalar values
CodeSet code_set_minus(const CodeSet& a, const CodeSet& b);
bool code_set_contains(const CodeSet& a, uint32_t c);

// Thompson NFA: state 0 is the start; each state has epsilon moves and at most one
// labelled move.
struct Nfa {
  struct State {
    std::vector<int32_t> epsilon;
    CodeSet label;
    int32_t target = -1;  // the labelled move's target, -1 without one
  };
  std::vector<State> states;
  int32_t accept = -1;
};

struct Dfa {
  struct Edge {
    CharRange range;
    int32_t target;
  };
  struct State {
    std::vector<Edge> edges;  // sorted by range, disjoint
    bool accepting = false;
  };
  std::vector<State> states;  // state 0 is the start; an empty vector accepts nothing
};

// Bounds the work of building automata from untrusted schemas; past them the caller gets
// an error naming `what`.
struct AutomatonLimits {
  size_t max_nfa_states = 100000;
  size_t max_dfa_states = 20000;
};

Result<Dfa> determinize(const Nfa& nfa, const AutomatonLimits& limits, const std::string& what);
enum class Combine { kBoth, kEither, kFirstOnly };
Result<Dfa> combine(const Dfa& a, const Dfa& b, Combine how, const AutomatonLimits& limits, const std::string& what);
// Only the states that are reachable and can still reach acceptance, renumbered.
Dfa trim(const Dfa& dfa);
bool dfa_matches(const Dfa& dfa, const std::u32string& text);

}  // namespace autoglm
