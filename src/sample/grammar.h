// Context-free grammars for constrained decoding, in a GBNF-style text form:
//
//   root   ::= "{" ws pair ("," ws pair)* "}"      # rules: name ::= alternatives
//   pair   ::= [a-z]+ ":" ws ( num | "null" )      # | alternation, ( ) grouping
//   num    ::= "-"? [0-9]{1,6}                     # * + ? {m} {m,} {m,n} repetition
//   ws     ::= [ \t\n]?                            # [...] [^...] classes, . any character
//
// Names are [A-Za-z0-9_-]+; a rule's body runs until the next `name ::=`. Literals and
// classes take the escapes \n \r \t \\ \" \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH. `#` starts a
// comment. The start rule is `root`. Left recursion is rejected (the matcher is top-down).
//
// The matcher keeps the set of pushdown stacks that the text so far is consistent with;
// it advances one code point at a time and can say which code points may come next.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autoglm/limits.h"
#include "autoglm/status.h"

namespace autoglm {

struct CharRange {
  uint32_t lo, hi;  // inclusive code points
};

struct CharSet {
  std::vector<CharRange> ranges;
  bool negated = false;
  bool matches(uint32_t c) const;
  bool intersects(uint32_t lo, uint32_t hi) const;  // any code point of [lo, hi] matches
  // Bytes of the shortest UTF-8 character the set matches (kUnmatchable: none).
  int32_t min_utf8_length() const;
  static constexpr int32_t kUnmatchable = 1 << 20;
};

struct GrammarSymbol {
  bool is_rule;
  int32_t index;  // into rules or sets
};

struct GrammarRule {
  std::string name;
  std::vector<std::vector<GrammarSymbol>> alternatives;
};

// What one grammar may cost; requests' grammars and schemas are untrusted. Errors name the
// limit by these field names (the server's `limits:` config uses the same names).
struct GrammarLimits {
  size_t max_text_bytes = size_t(1) << 20;  // grammar_bytes: the GBNF text (a schema's after conversion)
  size_t max_symbols = 200000;              // grammar_symbols: after repetitions expand
  size_t max_stacks = 4096;                 // grammar_stacks: parses alive at once

  static GrammarLimits of(const RequestLimits& limits) {
    return {size_t(limits.grammar_bytes), size_t(limits.grammar_symbols), size_t(limits.grammar_stacks)};
  }
};

class Grammar {
 public:
  // Parses and checks GBNF text; errors name the line and column (or the rule, or the limit).
  static Result<std::shared_ptr<const Grammar>> parse(const std::string& text, const GrammarLimits& limits = {});

  const std::vector<GrammarRule>& rules() const { return rules_; }
  const std::vector<CharSet>& sets() const { return sets_; }
  int32_t root() const { return root_; }
  // The fewest bytes (UTF-8) a rule can match.
  int32_t min_length(int32_t rule) const { return min_length_[size_t(rule)]; }
  // The same for a character class: its shortest character's bytes.
  int32_t min_set_length(int32_t set) const { return min_set_length_[size_t(set)]; }
  size_t max_stacks() const { return max_stacks_; }
  // The GBNF text it was parsed from (what makes two grammars the same, for a cache key).
  const std::string& source() const { return source_; }

 private:
  friend class GbnfParser;
  void compute_min_lengths();
  std::vector<int32_t> min_length_;
  std::vector<int32_t> min_set_length_;
  std::vector<GrammarRule> rules_;
  std::vector<CharSet> sets_;
  int32_t root_ = -1;
  std::string source_;
  size_t max_stacks_ = GrammarLimits{}.max_stacks;
};

// Where a text stands in a grammar: every pushdown stack it is consistent with.
class GrammarState {
 public:
  explicit GrammarState(std::shared_ptr<const Grammar> grammar);  // at the start

  // The state after one more code point, or after one more byte of UTF-8 (bytes of an
  // unfinished character wait until it is complete). dead() once nothing can follow.
  GrammarState advance(uint32_t code_point) const;
  GrammarState advance_byte(uint8_t byte) const;
  GrammarState advance_bytes(const std::string& bytes) const;

  bool dead() const { return stacks_.empty(); }
  // More than the grammar's max_stacks parses at once: the state is dead (Grammar::parse
  // refuses grammars whose start overflows).
  bool overflowed() const { return overflowed_; }
  bool accepting() const;     // the text so far is a whole sentence of the grammar
  bool can_continue() const;  // some stack still expects a character
  // The fewest bytes that complete the text into a sentence (0 when accepting), the rest of
  // an unfinished character included.
  int32_t distance_to_accept() const;
  // Bytes of an unfinished UTF-8 character read so far.
  size_t pending_bytes() const { return pending_.size(); }
  // A compact, comparable description (the mask cache's key).
  std::string key() const;

 private:
  struct Frame {
    int32_t rule, alt, pos;
    bool operator==(const Frame& o) const { return rule == o.rule && alt == o.alt && pos == o.pos; }
    bool operator<(const Frame& o) const {
      return rule != o.rule ? rule < o.rule : alt != o.alt ? alt < o.alt : pos < o.pos;
    }
  };
  using Stack = std::vector<Frame>;
  GrammarState() = default;
  void expand(Stack stack, std::vector<Stack>& out);
  void expand_one(Stack stack, std::vector<Stack>& out, std::vector<Stack>& todo) const;
  void normalize();

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Stack> stacks_;  // each top is a character class, or the stack is empty (accepting)
  std::string pending_;        // bytes of an unfinished UTF-8 character
  bool overflowed_ = false;
};

}  // namespace autoglm
