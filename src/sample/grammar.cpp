#include "sample/grammar.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <queue>
#include <set>

namespace autoglm {

bool CharSet::matches(uint32_t c) const {
  bool in = false;
  for (const CharRange& r : ranges)
    if (c >= r.lo && c <= r.hi) {
      in = true;
      break;
    }
  return in != negated;
}

bool CharSet::intersects(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const CharRange& r : ranges)
      if (r.lo <= hi && lo <= r.hi) return true;
    return false;
  }
  // Negated: some code point of [lo, hi] lies outside every range.
  uint32_t c = lo;
  for (bool moved = true; moved && c <= hi;) {
    moved = false;
    for (const CharRange& r : ranges)
      if (c >= r.lo && c <= r.hi) {
        if (r.hi >= hi) return false;
        c = r.hi + 1;
        moved = true;
      }
  }
  return c <= hi;
}

int32_t CharSet::min_utf8_length() const {
  if (intersects(0, 0x7f)) return 1;
  if (intersects(0x80, 0x7ff)) return 2;
  if (intersects(0x800, 0xd7ff) || intersects(0xe000, 0xffff)) return 3;
  if (intersects(0x10000, 0x10ffff)) return 4;
  return kUnmatchable;
}

namespace {

constexpr size_t kMaxStackDepth = 512;
constexpr int kMaxRepeat = 10000;

size_t utf8_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 6) return 2;
  if ((lead >> 4) == 14) return 3;
  if ((lead >> 3) == 30) return 4;
  return 0;
}

// Shortest form, a Unicode scalar value (no surrogates, nothing past U+10FFFF).
bool well_formed(uint32_t cp, size_t n) {
  static const uint32_t min_for_length[5] = {0, 0, 0x80, 0x800, 0x10000};
  return cp >= min_for_length[n] && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
}

// Decodes one UTF-8 character at s[i]; 0 bytes if malformed (overlong forms included).
size_t decode_utf8(const std::string& s, size_t i, uint32_t& cp) {
  const auto lead = static_cast<uint8_t>(s[i]);
  const size_t n = utf8_length(lead);
  if (n == 0 || i + n > s.size()) return 0;
  cp = n == 1 ? lead : lead & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<uint8_t>(s[i + k]);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  return well_formed(cp, n) ? n : 0;
}

}  // namespace

// Recursive-descent parser of the GBNF text into rules and character sets.
class GbnfParser {
 public:
  GbnfParser(const std::string& text, const GrammarLimits& limits) : t_(text), max_symbols_(limits.max_symbols) {
    g_.max_stacks_ = limits.max_stacks;
    g_.source_ = text;
  }

  Result<std::shared_ptr<const Grammar>> run() {
    skip_space(true);
    if (i_ >= t_.size()) return error("the grammar is empty");
    while (i_ < t_.size()) {
      const size_t at = i_;
      std::string name = parse_name();
      if (name.empty()) return error("expected a rule name");
      skip_space(false);
      if (t_.compare(i_, 3, "::=") != 0) return error("expected '::=' after rule name '" + name + "'");
      i_ += 3;
      const int32_t id = rule_id(name);
      if (defined_[size_t(id)]) {
        i_ = at;
        return error("rule '" + name + "' is defined twice");
      }
      defined_[size_t(id)] = true;
      AUTOGLM_ASSIGN_OR_RETURN(g_.rules_[size_t(id)].alternatives, parse_alternatives(0));
      if (i_ < t_.size() && t_[i_] == ')') return error("unbalanced ')'");
      skip_space(true);
    }
    for (size_t r = 0; r < g_.rules_.size(); ++r)
      if (!defined_[r]) return invalid_argument("grammar: rule '" + g_.rules_[r].name + "' is used but not defined");
    auto root = rule_index_.find("root");
    if (root == rule_index_.end()) return invalid_argument("grammar: no 'root' rule");
    g_.root_ = root->second;
    AUTOGLM_RETURN_IF_ERROR(check_left_recursion());
    g_.compute_min_lengths();
    return std::make_shared<const Grammar>(std::move(g_));
  }

 private:
  using Sequence = std::vector<GrammarSymbol>;
  using Alternatives = std::vector<Sequence>;

  Status error(const std::string& message) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < t_.size(); ++k) {
      if (t_[k] == '\n')
        ++line, col = 1;
      else
        ++col;
    }
    return invalid_argument("grammar line " + std::to_string(line) + ", column " + std::to_string(col) + ": " +
                            message);
  }

  static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  }

  std::string parse_name() {
    const size_t start = i_;
    while (i_ < t_.size() && is_name_char(t_[i_])) ++i_;
    return t_.substr(start, i_ - start);
  }

  void skip_space(bool newlines) {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++i_;
      } else {
        break;
      }
    }
  }

  // A new rule starts here: `name ::=`.
  bool at_rule_start() const {
    size_t k = i_;
    while (k < t_.size() && is_name_char(t_[k])) ++k;
    if (k == i_) return false;
    while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t')) ++k;
    return t_.compare(k, 3, "::=") == 0;
  }

  int32_t rule_id(const std::string& name) {
    auto it = rule_index_.find(name);
    if (it != rule_index_.end()) return it->second;
    const int32_t id = int32_t(g_.rules_.size());
    g_.rules_.push_back({name, {}});
    defined_.push_back(false);
    rule_index_[name] = id;
    return id;
  }

  int32_t helper_rule(Alternatives alts) {
    const int32_t id = int32_t(g_.rules_.size());
    symbols_ += 1;
    for (const Sequence& s : alts) symbols_ += s.size();
    g_.rules_.push_back({"(helper " + std::to_string(id) + ")", std::move(alts)});
    defined_.push_back(true);
    return id;
  }

  GrammarSymbol set_symbol(CharSet set) {
    g_.sets_.push_back(std::move(set));
    return {false, int32_t(g_.sets_.size() - 1)};
  }

  // One character of a literal or class, escapes decoded.
  Result<uint32_t> parse_char() {
    if (i_ >= t_.size()) return error("unexpected end of the grammar");
    if (t_[i_] != '\\') {
      uint32_t cp = 0;
      const size_t n = decode_utf8(t_, i_, cp);
      if (n == 0) return error("invalid UTF-8");
      i_ += n;
      return cp;
    }
    if (++i_ >= t_.size()) return error("unfinished escape");
    const char e = t_[i_++];
    switch (e) {
      case 'n': return uint32_t('\n');
      case 'r': return uint32_t('\r');
      case 't': return uint32_t('\t');
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/':
      case '.': return uint32_t(uint8_t(e));
      case 'x': return parse_hex(2);
      case 'u': return parse_hex(4);
      case 'U': return parse_hex(8);
      default: --i_; return error(std::string("unknown escape '\\") + e + "'");
    }
  }

  Result<uint32_t> parse_hex(int digits) {
    uint32_t v = 0;
    for (int d = 0; d < digits; ++d, ++i_) {
      if (i_ >= t_.size() || !std::isxdigit(static_cast<unsigned char>(t_[i_])))
        return error("expected " + std::to_string(digits) + " hex digits");
      const char c = t_[i_];
      v = v * 16 + uint32_t(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    if (v > 0x10ffff) return error("code point out of range");
    return v;
  }

  Result<Sequence> parse_literal() {
    ++i_;  // opening quote
    Sequence seq;
    while (i_ < t_.size() && t_[i_] != '"') {
      AUTOGLM_ASSIGN_OR_RETURN(const uint32_t c, parse_char());
      seq.push_back(set_symbol({{{c, c}}, false}));
    }
    if (i_ >= t_.size()) return error("unterminated string literal");
    ++i_;
    return seq;
  }

  Result<Sequence> parse_class() {
    ++i_;  // [
    CharSet set;
    if (i_ < t_.size() && t_[i_] == '^') set.negated = true, ++i_;
    while (i_ < t_.size() && t_[i_] != ']') {
      AUTOGLM_ASSIGN_OR_RETURN(const uint32_t lo, parse_char());
      uint32_t hi = lo;
      if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
        ++i_;
        AUTOGLM_ASSIGN_OR_RETURN(hi, parse_char());
        if (hi < lo) return error("character range is reversed");
      }
      set.ranges.push_back({lo, hi});
    }
    if (i_ >= t_.size()) return error("unterminated character class");
    ++i_;
    return Sequence{set_symbol(std::move(set))};
  }

  Result<Sequence> parse_primary(int depth) {
    const char c = t_[i_];
    if (c == '"') return parse_literal();
    if (c == '[') return parse_class();
    if (c == '.') {
      ++i_;
      return Sequence{set_symbol({{}, true})};
    }
    if (c == '(') {
      ++i_;
      AUTOGLM_ASSIGN_OR_RETURN(Alternatives alts, parse_alternatives(depth + 1));
      if (i_ >= t_.size() || t_[i_] != ')') return error("expected ')'");
      ++i_;
      return Sequence{{true, helper_rule(std::move(alts))}};
    }
    if (is_name_char(c)) return Sequence{{true, rule_id(parse_name())}};
    return error(std::string("unexpected character '") + c + "'");
  }

  // The item as one symbol (a helper rule when it is a longer literal).
  GrammarSymbol as_symbol(Sequence item) {
    if (item.size() == 1) return item[0];
    return {true, helper_rule({std::move(item)})};
  }

  Status apply_repetition(Sequence& item, Sequence& seq) {
    const char op = t_[i_];
    int lo = 0, hi = -1;  // hi -1: unbounded
    if (op == '*' || op == '+' || op == '?') {
      ++i_;
      lo = op == '+' ? 1 : 0;
      hi = op == '?' ? 1 : -1;
    } else {  // {m}, {m,}, {m,n}
      ++i_;
      auto number = [&](int& out) {
        const size_t start = i_;
        while (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_]))) ++i_;
        if (i_ == start || i_ - start > 5) return false;
        out = std::stoi(t_.substr(start, i_ - start));
        return true;
      };
      if (!number(lo)) return error("expected a repetition count");
      hi = lo;
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        hi = -1;
        if (i_ < t_.size() && t_[i_] != '}' && !number(hi)) return error("expected a repetition bound");
      }
      if (i_ >= t_.size() || t_[i_] != '}') return error("expected '}'");
      ++i_;
      if (hi >= 0 && hi < lo) return error("repetition bound is below its count");
      if (lo > kMaxRepeat || hi > kMaxRepeat) return error("repetition count above " + std::to_string(kMaxRepeat));
    }
    const GrammarSymbol s = as_symbol(std::move(item));
    // Bounded repetitions expand into copies and helper rules: bound what they add up to.
    symbols_ += size_t(lo) + 2 * size_t(std::max(0, hi - lo));
    if (symbols_ > max_symbols_)
      return error("the grammar expands to more than " + std::to_string(max_symbols_) +
                   " symbols (repetition counts add up; limit grammar_symbols)");
    for (int k = 0; k < lo; ++k) seq.push_back(s);
    if (hi < 0) {  // R ::= s R | ε
      const int32_t r = helper_rule({});
      g_.rules_[size_t(r)].alternatives = {{s, {true, r}}, {}};
      seq.push_back({true, r});
    } else if (hi > lo) {  // R_k ::= s R_{k-1} | ε
      int32_t prev = helper_rule({{s}, {}});
      for (int k = 1; k < hi - lo; ++k) prev = helper_rule({{s, {true, prev}}, {}});
      seq.push_back({true, prev});
    }
    return Status::ok();
  }

  Result<Alternatives> parse_alternatives(int depth) {
    if (depth > 64) return error("groups nested too deeply");
    Alternatives alts(1);
    for (;;) {
      skip_space(true);
      if (i_ >= t_.size() || t_[i_] == ')' || (depth == 0 && at_rule_start())) break;
      if (t_[i_] == '|') {
        ++i_;
        alts.emplace_back();
        continue;
      }
      AUTOGLM_ASSIGN_OR_RETURN(Sequence item, parse_primary(depth));
      skip_space(false);
      if (i_ < t_.size() && (t_[i_] == '*' || t_[i_] == '+' || t_[i_] == '?' || t_[i_] == '{')) {
        AUTOGLM_RETURN_IF_ERROR(apply_repetition(item, alts.back()));
      } else {
        alts.back().insert(alts.back().end(), item.begin(), item.end());
      }
    }
    return alts;
  }

  // A top-down matcher loops on left recursion: refuse it, naming the rule.
  Status check_left_recursion() const {
    const size_t n = g_.rules_.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const Sequence& alt : g_.rules_[r].alternatives)
          if (std::all_of(alt.begin(), alt.end(),
                          [&](const GrammarSymbol& s) { return s.is_rule && nullable[size_t(s.index)]; })) {
            nullable[r] = changed = true;
            break;
          }
      }
    }
    std::vector<std::vector<int32_t>> leftmost(n);  // rules reachable without consuming input
    for (size_t r = 0; r < n; ++r)
      for (const Sequence& alt : g_.rules_[r].alternatives)
        for (const GrammarSymbol& s : alt) {
          if (!s.is_rule) break;
          leftmost[r].push_back(s.index);
          if (!nullable[size_t(s.index)]) break;
        }
    // Depth-first search for a cycle, with an explicit stack: a chain of 10^5 rules is no
    // deeper for it than one rule.
    std::vector<int> color(n, 0);                  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<int32_t, size_t>> path;  // rule, next leftmost edge to follow
    for (size_t start = 0; start < n; ++start) {
      if (color[start] != 0) continue;
      color[start] = 1;
      path.push_back({int32_t(start), 0});
      while (!path.empty()) {
        auto& [r, edge] = path.back();
        if (edge == leftmost[size_t(r)].size()) {
          color[size_t(r)] = 2;
          path.pop_back();
          continue;
        }
        const int32_t next = leftmost[size_t(r)][edge++];
        if (color[size_t(next)] == 1)
          return invalid_argument("grammar: rule '" + g_.rules_[size_t(next)].name +
                                  "' is left-recursive (not supported)");
        if (color[size_t(next)] == 0) {
          color[size_t(next)] = 1;
          path.push_back({next, 0});
        }
      }
    }
    return Status::ok();
  }

  const std::string& t_;
  size_t i_ = 0;
  size_t max_symbols_;
  size_t symbols_ = 0;  // symbols the grammar has expanded to so far
  Grammar g_;
  std::map<std::string, int32_t> rule_index_;
  std::vector<bool> defined_;
};

// The shortest text (in UTF-8 bytes) each rule derives, in time linear in the grammar (times
// a log): Knuth's generalization of Dijkstra's algorithm. A rule is settled when its smallest candidate
// leaves the queue; an alternative becomes a candidate once all its rules are settled.
void Grammar::compute_min_lengths() {
  constexpr int32_t kUnknown = 1 << 30;
  min_length_.assign(rules_.size(), kUnknown);
  min_set_length_.clear();
  for (const CharSet& set : sets_) min_set_length_.push_back(set.min_utf8_length());
  struct Alt {
    int32_t rule;
    int64_t length = 0;   // terminals, plus the settled rules so far
    int64_t pending = 0;  // rule references not settled yet
  };
  std::vector<Alt> alts;
  std::vector<std::vector<int32_t>> used_by(rules_.size());  // rule -> alternatives referencing it (with repeats)
  using Candidate = std::pair<int64_t, int32_t>;             // length, rule
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  for (size_t r = 0; r < rules_.size(); ++r)
    for (const auto& seq : rules_[r].alternatives) {
      Alt a{int32_t(r)};
      for (const GrammarSymbol& sym : seq) {
        if (!sym.is_rule) {
          a.length += min_set_length_[size_t(sym.index)];
          continue;
        }
        ++a.pending;
        used_by[size_t(sym.index)].push_back(int32_t(alts.size()));
      }
      if (a.pending == 0) queue.push({a.length, a.rule});
      alts.push_back(a);
    }
  std::vector<bool> settled(rules_.size(), false);
  while (!queue.empty()) {
    const auto [length, r] = queue.top();
    queue.pop();
    if (settled[size_t(r)]) continue;
    settled[size_t(r)] = true;
    min_length_[size_t(r)] = int32_t(std::min<int64_t>(length, kUnknown));
    for (int32_t a : used_by[size_t(r)]) {
      alts[size_t(a)].length = std::min<int64_t>(alts[size_t(a)].length + length, kUnknown);
      if (--alts[size_t(a)].pending == 0 && !settled[size_t(alts[size_t(a)].rule)])
        queue.push({alts[size_t(a)].length, alts[size_t(a)].rule});
    }
  }
}

Result<std::shared_ptr<const Grammar>> Grammar::parse(const std::string& text, const GrammarLimits& limits) {
  if (text.size() > limits.max_text_bytes)
    return invalid_argument("grammar: " + std::to_string(text.size()) + " bytes of grammar text, over the limit of " +
                            std::to_string(limits.max_text_bytes) + " (limit grammar_bytes)");
  AUTOGLM_ASSIGN_OR_RETURN(auto parsed, GbnfParser(text, limits).run());
  if (GrammarState(parsed).overflowed())  // nested alternatives multiply the parses at the start
    return invalid_argument("grammar: more than " + std::to_string(limits.max_stacks) +
                            " parses at its start (alternatives nested too deeply; limit grammar_stacks)");
  return parsed;
}

GrammarState::GrammarState(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  for (size_t a = 0; a < grammar_->rules()[size_t(grammar_->root())].alternatives.size(); ++a)
    expand({{grammar_->root(), int32_t(a), 0}}, stacks_);
  normalize();
}

void GrammarState::normalize() {
  if (overflowed_) stacks_.clear();  // too many parses at once: nothing may follow (dead)
  std::sort(stacks_.begin(), stacks_.end());
  stacks_.erase(std::unique(stacks_.begin(), stacks_.end()), stacks_.end());
}

// Moves the stack forward to the character classes it may read next (one stack per choice).
// Choices wait in a work list (no recursion: nested nullable rules can be 10^4 deep), and
// at most the grammar's max_stacks come out; past that the state is marked overflowed.
void GrammarState::expand(Stack first, std::vector<Stack>& out) {
  std::vector<Stack> todo;
  todo.push_back(std::move(first));
  while (!todo.empty()) {
    if (out.size() >= grammar_->max_stacks()) {
      overflowed_ = true;
      return;
    }
    Stack stack = std::move(todo.back());
    todo.pop_back();
    expand_one(std::move(stack), out, todo);
  }
}

void GrammarState::expand_one(Stack stack, std::vector<Stack>& out, std::vector<Stack>& todo) const {
  const auto& rules = grammar_->rules();
  while (!stack.empty()) {
    Frame& top = stack.back();
    const auto& seq = rules[size_t(top.rule)].alternatives[size_t(top.alt)];
    if (size_t(top.pos) == seq.size()) {
      stack.pop_back();
      continue;
    }
    const GrammarSymbol sym = seq[size_t(top.pos)];
    if (!sym.is_rule) break;
    if (stack.size() >= kMaxStackDepth) return;
    ++top.pos;  // the rule's continuation, once the referenced rule is done
    // A reference in tail position leaves nothing to continue: drop the frame, so right
    // recursion (repetition) keeps the stack flat and its states repeat.
    if (size_t(top.pos) == seq.size()) stack.pop_back();
    const auto& alts = rules[size_t(sym.index)].alternatives;
    if (alts.empty()) return;
    for (size_t a = 0; a + 1 < alts.size(); ++a) {
      Stack branch = stack;
      branch.push_back({sym.index, int32_t(a), 0});
      todo.push_back(std::move(branch));
    }
    stack.push_back({sym.index, int32_t(alts.size() - 1), 0});
  }
  out.push_back(std::move(stack));
}

GrammarState GrammarState::advance(uint32_t c) const {
  GrammarState next;
  next.grammar_ = grammar_;
  const auto& rules = grammar_->rules();
  const auto& sets = grammar_->sets();
  for (const Stack& s : stacks_) {
    if (s.empty()) continue;
    const Frame& top = s.back();
    const GrammarSymbol sym = rules[size_t(top.rule)].alternatives[size_t(top.alt)][size_t(top.pos)];
    if (!sets[size_t(sym.index)].matches(c)) continue;
    Stack moved = s;
    ++moved.back().pos;
    next.expand(std::move(moved), next.stacks_);
  }
  next.normalize();
  return next;
}

GrammarState GrammarState::advance_byte(uint8_t byte) const {
  std::string bytes = pending_ + char(byte);
  const size_t need = utf8_length(static_cast<uint8_t>(bytes[0]));
  if (need == 0 || (bytes.size() > 1 && (byte & 0xc0) != 0x80)) {  // not UTF-8: nothing can follow
    GrammarState dead;
    dead.grammar_ = grammar_;
    return dead;
  }
  if (bytes.size() == need) {
    uint32_t cp = 0;
    if (decode_utf8(bytes, 0, cp) == 0) {
      GrammarState dead;
      dead.grammar_ = grammar_;
      return dead;
    }
    return advance(cp);
  }
  // Unfinished character: keep the stacks whose next class admits some character with this prefix.
  uint32_t lo = static_cast<uint8_t>(bytes[0]) & (0x7f >> need), hi = lo;
  for (size_t k = 1; k < need; ++k) {
    const uint32_t b = k < bytes.size() ? static_cast<uint8_t>(bytes[k]) & 0x3f : 0;
    lo = (lo << 6) | b;
    hi = (hi << 6) | (k < bytes.size() ? b : 0x3f);
  }
  // Only shortest forms of scalar values may complete this prefix.
  static const uint32_t min_for_length[5] = {0, 0, 0x80, 0x800, 0x10000};
  lo = std::max(lo, min_for_length[need]);
  hi = std::min<uint32_t>(hi, 0x10ffff);
  if (lo >= 0xd800 && hi <= 0xdfff) lo = hi + 1;  // surrogates only
  if (lo > hi) {
    GrammarState dead;
    dead.grammar_ = grammar_;
    return dead;
  }
  GrammarState next;
  next.grammar_ = grammar_;
  next.pending_ = bytes;
  const auto& rules = grammar_->rules();
  for (const Stack& s : stacks_) {
    if (s.empty()) continue;
    const Frame& top = s.back();
    const GrammarSymbol sym = rules[size_t(top.rule)].alternatives[size_t(top.alt)][size_t(top.pos)];
    if (grammar_->sets()[size_t(sym.index)].intersects(lo, hi)) next.stacks_.push_back(s);
  }
  return next;
}

GrammarState GrammarState::advance_bytes(const std::string& bytes) const {
  GrammarState s = *this;
  for (char b : bytes) {
    s = s.advance_byte(static_cast<uint8_t>(b));
    if (s.dead()) break;
  }
  return s;
}

bool GrammarState::accepting() const {
  return pending_.empty() && std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

bool GrammarState::can_continue() const {
  return std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return !s.empty(); });
}

int32_t GrammarState::distance_to_accept() const {
  int64_t best = int64_t(1) << 30;
  const auto& rules = grammar_->rules();
  // An unfinished character's stacks still have its class on top: the rest of its bytes.
  const int64_t rest_of_char =
      pending_.empty() ? 0 : int64_t(utf8_length(static_cast<uint8_t>(pending_[0])) - pending_.size());
  for (const Stack& s : stacks_) {
    int64_t d = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const Frame& f = s[i];
      const auto& seq = rules[size_t(f.rule)].alternatives[size_t(f.alt)];
      size_t k = size_t(f.pos);
      if (!pending_.empty() && i + 1 == s.size()) d += rest_of_char, ++k;
      for (; k < seq.size(); ++k)
        d += seq[k].is_rule ? grammar_->min_length(seq[k].index) : grammar_->min_set_length(seq[k].index);
    }
    best = std::min(best, d);
  }
  return int32_t(std::min<int64_t>(best, int64_t(1) << 30));
}

std::string GrammarState::key() const {
  std::string k = pending_;
  k += '\0';
  for (const Stack& s : stacks_) {
    const uint32_t n = uint32_t(s.size());
    k.append(reinterpret_cast<const char*>(&n), 4);
    k.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(Frame));
  }
  return k;
}

}  // namespace autoglm
