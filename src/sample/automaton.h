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

// Bounds the work of building automata from untrusted schemas, as GrammarLimits bound a
// grammar's; past them the caller gets an error naming `what`. States alone do not bound
// the cost: `^(c{1,100}){1,100}$` has 20000 NFA and 10001 DFA states, but each DFA state
// is a set of thousands of NFA states, and building them took seconds and 800 MB.
struct AutomatonLimits {
  // After counted repetitions are copied out; a state's label ranges count too (they are
  // its memory: a class of 10000 ranges repeated 1000 times is 10^7 of them).
  size_t max_nfa_states = 100000;
  size_t max_dfa_states = 20000;
  // Work: NFA states and ranges visited while determinizing, state pairs and edges while
  // combining. Steps, not seconds, so that a schema is refused or built the same on every
  // machine and under any load. 4*10^6 steps take under 0.1 s and at most 16 MB of subsets
  // (the bomb above needs 3.4*10^8); every format, a length of 1000 and integer bounds of
  // +-2^53 need under 30000 each, and ^[a-z]{1,20}@[a-z]{2,10}\.com$ under 1000.
  size_t max_steps = 4000000;
};

// The steps spent against AutomatonLimits::max_steps. One budget serves every automaton of
// a schema (patterns, formats, lengths, number bounds), so many patterns that each fit do
// not add up to a slow request.
class AutomatonBudget {
 public:
  explicit AutomatonBudget(const AutomatonLimits& limits = {}) : limits_(limits) {}
  const AutomatonLimits& limits() const { return limits_; }
  void spend(size_t steps) { steps_ += steps; }
  size_t steps() const { return steps_; }
  // An error naming `what` once the steps spent pass max_steps.
  Status check(const std::string& what) const;

 private:
  AutomatonLimits limits_;
  size_t steps_ = 0;
};

Result<Dfa> determinize(const Nfa& nfa, AutomatonBudget& budget, const std::string& what);
enum class Combine { kBoth, kEither, kFirstOnly };
Result<Dfa> combine(const Dfa& a, const Dfa& b, Combine how, AutomatonBudget& budget, const std::string& what);
// Only the states that are reachable and can still reach acceptance, renumbered.
Dfa trim(const Dfa& dfa);
bool dfa_matches(const Dfa& dfa, const std::u32string& text);

}  // namespace autoglm
