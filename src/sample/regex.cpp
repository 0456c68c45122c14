#include "sample/regex.h"

#include <optional>

namespace autoglm {
namespace {

struct Node {
  enum Kind { kSet, kSeq, kAlt, kRepeat } kind = kSeq;
  CodeSet set;
  std::vector<Node> kids;
  int lo = 0, hi = -1;  // kRepeat; hi -1: unbounded
};

struct Lookahead {
  bool positive;
  Node body;
};

struct Branch {
  bool anchored_start = false, anchored_end = false;
  std::vector<Lookahead> lookaheads;
  Node body;
};

const CodeSet kDigits = {{'0', '9'}};
const CodeSet kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodeSet kSpace = {{'\t', '\r'},     {' ', ' '},       {0xa0, 0xa0},     {0x1680, 0x1680}, {0x2000, 0x200a},
                        {0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f}, {0x3000, 0x3000}, {0xfeff, 0xfeff}};
const CodeSet kLineTerminators = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};

std::u32string decode(const std::string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : 4;
    uint32_t cp = n == 1 ? b : b & (0x7f >> n);
    for (size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (uint8_t(s[i + k]) & 0x3f);
    out += char32_t(cp);
    i += n;
  }
  return out;
}

class RegexParser {
 public:
  explicit RegexParser(const std::string& pattern) : p_(decode(pattern)) {}

  Result<std::vector<Branch>> parse() {
    std::vector<Branch> branches;
    do {
      Branch b;
      if (peek('^')) ++i_, b.anchored_start = true;
      while (b.anchored_start && (at("(?=") || at("(?!"))) {
        const bool positive = p_[i_ + 2] == '=';
        i_ += 3;
        AUTOGLM_ASSIGN_OR_RETURN(Node body, parse_alternation(1));
        AUTOGLM_RETURN_IF_ERROR(expect(')'));
        b.lookaheads.push_back({positive, std::move(body)});
      }
      AUTOGLM_ASSIGN_OR_RETURN(b.body, parse_sequence(0));
      if (peek('$')) ++i_, b.anchored_end = true;
      branches.push_back(std::move(b));
    } while (consume('|'));
    if (i_ < p_.size()) return error(p_[i_] == ')' ? "unbalanced ')'" : "'$' is supported only at the end");
    return branches;
  }

 private:
  Status error(const std::string& what) const { return error_at(i_, what); }
  Status error_at(size_t at, const std::string& what) const {
    return invalid_argument("pattern: " + what + " at character " + std::to_string(at + 1));
  }
  bool peek(char32_t c) const { return i_ < p_.size() && p_[i_] == c; }
  bool at(const char* s) const {
    for (size_t k = 0; s[k]; ++k)
      if (i_ + k >= p_.size() || p_[i_ + k] != char32_t(s[k])) return false;
    return true;
  }
  bool consume(char32_t c) {
    if (!peek(c)) return false;
    ++i_;
    return true;
  }
  Status expect(char32_t c) {
    if (!peek(c)) return error(std::string("expected '") + char(c) + "'");
    ++i_;
    return Status::ok();
  }

  Result<Node> parse_alternation(int depth) {
    if (depth > 100) return error("groups nested too deeply");
    Node alt{Node::kAlt, {}, {}};
    do {
      AUTOGLM_ASSIGN_OR_RETURN(Node seq, parse_sequence(depth));
      alt.kids.push_back(std::move(seq));
    } while (consume('|'));
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : alt;
  }

  Result<Node> parse_sequence(int depth) {
    Node seq{Node::kSeq, {}, {}};
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$' && depth == 0 && (i_ + 1 == p_.size() || p_[i_ + 1] == '|')) break;
      AUTOGLM_ASSIGN_OR_RETURN(Node atom, parse_atom(depth));
      AUTOGLM_ASSIGN_OR_RETURN(atom, parse_quantifier(std::move(atom)));
      seq.kids.push_back(std::move(atom));
    }
    return seq;
  }

  Result<Node> parse_atom(int depth) {
    const char32_t c = p_[i_];
    if (c == '^' || c == '$') return error("anchors are supported only at the ends of the pattern");
    if (c == '*' || c == '+' || c == '?') return error("nothing to repeat");
    if (c == '.') return ++i_, set_node(code_set_complement(kLineTerminators));
    if (c == '[') return parse_class();
    if (c == '\\') {
      AUTOGLM_ASSIGN_OR_RETURN(CodeSet s, parse_escape(false));
      return set_node(std::move(s));
    }
    if (c == '(') return parse_group(depth);
    ++i_;
    return set_node({{uint32_t(c), uint32_t(c)}});
  }

  Result<Node> parse_group(int depth) {
    if (at("(?=") || at("(?!")) return error("lookahead is supported only right after a leading '^'");
    if (at("(?<=") || at("(?<!")) return error("lookbehind is not supported");
    if (at("(?:")) {
      i_ += 3;
    } else if (at("(?<")) {
      while (i_ < p_.size() && p_[i_] != '>') ++i_;
      AUTOGLM_RETURN_IF_ERROR(expect('>'));
    } else if (at("(?")) {
      return error("unknown group kind");
    } else {
      ++i_;
    }
    AUTOGLM_ASSIGN_OR_RETURN(Node inner, parse_alternation(depth + 1));
    AUTOGLM_RETURN_IF_ERROR(expect(')'));
    return inner;
  }

  static Node set_node(CodeSet s) { return Node{Node::kSet, std::move(s), {}}; }

  std::optional<int> parse_int() {
    const size_t start = i_;
    int64_t v = 0;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') v = std::min<int64_t>(v * 10 + (p_[i_++] - '0'), 1 << 30);
    if (i_ == start) return std::nullopt;
    return int(v);
  }

  Result<Node> parse_quantifier(Node atom) {
    if (i_ >= p_.size()) return atom;
    int lo = 0, hi = -1;
    const char32_t c = p_[i_];
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      lo = c == '+' ? 1 : 0;
      hi = c == '?' ? 1 : -1;
    } else if (c == '{') {
      const size_t start = i_++;
      const auto m = parse_int();
      std::optional<int> n = m;
      if (m && peek(',')) ++i_, n = parse_int();
      if (!m || !peek('}')) {  // not a quantifier: a literal '{'
        i_ = start;
        return atom;
      }
      ++i_;
      lo = *m;
      hi = n ? *n : -1;
      if (hi >= 0 && hi < lo) return error("quantifier range is reversed");
      if (lo > 1000 || hi > 1000) return error("quantifier bound over 1000");
    } else {
      return atom;
    }
    if (peek('?')) ++i_;  // lazy: the same strings
    if (peek('*') || peek('+') || peek('?') || peek('{')) return error("nothing to repeat");
    Node rep{Node::kRepeat, {}, {}};
    rep.kids.push_back(std::move(atom));
    rep.lo = lo;
    rep.hi = hi;
    return rep;
  }

  Result<uint32_t> parse_hex(size_t digits) {
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k, ++i_) {
      if (i_ >= p_.size() || !std::isxdigit(int(p_[i_] < 128 ? p_[i_] : 0))) return error("expected hex digits");
      const char d = char(p_[i_]);
      v = v * 16 + uint32_t(d <= '9' ? d - '0' : (d | 0x20) - 'a' + 10);
    }
    return v;
  }

  // After a backslash; in a class \b is a backspace and \- a dash.
  Result<CodeSet> parse_escape(bool in_class) {
    const size_t start = i_++;
    if (i_ >= p_.size()) return error("the pattern ends with a backslash");
    const char32_t e = p_[i_++];
    auto one = [](uint32_t c) { return CodeSet{{c, c}}; };
    switch (e) {
      case 'd': return kDigits;
      case 'D': return code_set_complement(kDigits);
      case 'w': return kWord;
      case 'W': return code_set_complement(kWord);
      case 's': return kSpace;
      case 'S': return code_set_complement(kSpace);
      case 't': return one('\t');
      case 'n': return one('\n');
      case 'r': return one('\r');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case '0': return one(0);
      case 'x': {
        AUTOGLM_ASSIGN_OR_RETURN(const uint32_t v, parse_hex(2));
        return one(v);
      }
      case 'u': {
        if (!peek('{')) {
          AUTOGLM_ASSIGN_OR_RETURN(const uint32_t v, parse_hex(4));
          return one(v);
        }
        ++i_;
        size_t digits = 0;
        while (i_ + digits < p_.size() && p_[i_ + digits] != '}') ++digits;
        if (digits == 0 || digits > 6) return error("bad \\u{...} escape");
        AUTOGLM_ASSIGN_OR_RETURN(const uint32_t v, parse_hex(digits));
        AUTOGLM_RETURN_IF_ERROR(expect('}'));
        if (v > 0x10ffff) return error("code point out of range");
        return one(v);
      }
      case 'b':
        if (in_class) return one('\b');
        return error_at(start, "word boundaries (\\b) are not supported");
      case 'B': return error_at(start, "word boundaries (\\B) are not supported");
      case 'k': return error_at(start, "backreferences are not supported");
      case 'p':
      case 'P': return error_at(start, "Unicode property escapes are not supported");
      case 'c': return error_at(start, "control escapes (\\c) are not supported");
      default: break;
    }
    if (e >= '1' && e <= '9') return error_at(start, "backreferences are not supported");
    if (e < 128 && !std::isalnum(int(e))) return one(uint32_t(e));  // identity escape of punctuation
    return error_at(start, std::string("unknown escape '\\") + (e < 128 ? std::string(1, char(e)) : "?") + "'");
  }

  Result<Node> parse_class() {
    ++i_;  // [
    bool negated = false;
    if (peek('^')) ++i_, negated = true;
    CodeSet set;
    while (i_ < p_.size() && p_[i_] != ']') {
      AUTOGLM_ASSIGN_OR_RETURN(const CodeSet lo, class_atom());
      if (peek('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        AUTOGLM_ASSIGN_OR_RETURN(const CodeSet hi, class_atom());
        if (lo.size() != 1 || hi.size() != 1 || lo[0].lo != lo[0].hi || hi[0].lo != hi[0].hi)
          return error("a class escape cannot end a range");
        if (hi[0].lo < lo[0].lo) return error("character range is reversed");
        set = code_set_union(std::move(set), {{lo[0].lo, hi[0].lo}});
      } else {
        set = code_set_union(std::move(set), lo);
      }
    }
    AUTOGLM_RETURN_IF_ERROR(expect(']'));
    return set_node(negated ? code_set_complement(set) : code_set_minus(set, {{0xd800, 0xdfff}}));
  }

  Result<CodeSet> class_atom() {
    if (peek('\\')) return parse_escape(true);
    const uint32_t c = p_[i_++];
    return CodeSet{{c, c}};
  }

  std::u32string p_;
  size_t i_ = 0;
};

// Thompson construction; stops adding states once over the limit. Counted repetitions are
// copied out, so nesting multiplies: the size (states and label ranges, see
// AutomatonLimits) is checked as states are added, before any of the work of determinizing.
class NfaBuilder {
 public:
  explicit NfaBuilder(size_t limit) : limit_(limit) { nfa_.states.emplace_back(); }

  int32_t fresh() {
    if (overflowed()) return 0;  // the caller sees overflowed()
    nfa_.states.emplace_back();
    return int32_t(nfa_.states.size() - 1);
  }
  bool overflowed() const { return nfa_.states.size() + label_ranges_ > limit_; }
  void epsilon(int32_t from, int32_t to) { nfa_.states[size_t(from)].epsilon.push_back(to); }

  // Adds `node` starting at `from`; returns the state where it ends.
  int32_t emit(const Node& node, int32_t from) {
    if (overflowed()) return from;
    switch (node.kind) {
      case Node::kSet: {
        const int32_t s = fresh(), t = fresh();
        if (overflowed()) return from;
        epsilon(from, s);
        label_ranges_ += node.set.size();
        nfa_.states[size_t(s)].label = node.set;
        nfa_.states[size_t(s)].target = t;
        return t;
      }
      case Node::kSeq:
        for (const Node& kid : node.kids) from = emit(kid, from);
        return from;
      case Node::kAlt: {
        const int32_t end = fresh();
        for (const Node& kid : node.kids) {
          const int32_t s = fresh();
          epsilon(from, s);
          epsilon(emit(kid, s), end);
        }
        return end;
      }
      case Node::kRepeat: break;
    }
    for (int k = 0; k < node.lo; ++k) from = emit(node.kids[0], from);
    if (node.hi < 0) {
      const int32_t loop = fresh();
      epsilon(from, loop);
      epsilon(emit(node.kids[0], loop), loop);
      return loop;
    }
    const int32_t end = fresh();
    for (int k = node.lo; k < node.hi; ++k) {
      epsilon(from, end);
      from = emit(node.kids[0], from);
    }
    epsilon(from, end);
    return end;
  }

  Nfa finish(int32_t accept) {
    nfa_.accept = accept;
    return std::move(nfa_);
  }

 private:
  Nfa nfa_;
  size_t limit_;
  size_t label_ranges_ = 0;
};

Node any_string() {
  Node rep{Node::kRepeat, {}, {}};
  rep.kids.push_back(Node{Node::kSet, code_set_complement({}), {}});
  return rep;
}

Result<Dfa> to_dfa(const Node& node, AutomatonBudget& budget) {
  const size_t limit = budget.limits().max_nfa_states;
  NfaBuilder builder(limit);
  const int32_t end = builder.emit(node, 0);
  if (builder.overflowed())
    return invalid_argument("pattern: needs more than " + std::to_string(limit) +
                            " automaton states (repetition counts multiply; simplify it)");
  return determinize(builder.finish(end), budget, "pattern");
}

Result<Dfa> branch_dfa(Branch b, AutomatonBudget& budget) {
  Node whole{Node::kSeq, {}, {}};
  if (!b.anchored_start) whole.kids.push_back(any_string());
  whole.kids.push_back(std::move(b.body));
  if (!b.anchored_end) whole.kids.push_back(any_string());
  AUTOGLM_ASSIGN_OR_RETURN(Dfa dfa, to_dfa(whole, budget));
  for (Lookahead& la : b.lookaheads) {  // the rest of the string starts with la.body
    Node prefix{Node::kSeq, {}, {}};
    prefix.kids.push_back(std::move(la.body));
    prefix.kids.push_back(any_string());
    AUTOGLM_ASSIGN_OR_RETURN(const Dfa ahead, to_dfa(prefix, budget));
    AUTOGLM_ASSIGN_OR_RETURN(
        dfa, combine(dfa, ahead, la.positive ? Combine::kBoth : Combine::kFirstOnly, budget, "pattern"));
  }
  return dfa;
}

}  // namespace

Result<Dfa> compile_regex(const std::string& pattern, AutomatonBudget& budget) {
  AUTOGLM_ASSIGN_OR_RETURN(std::vector<Branch> branches, RegexParser(pattern).parse());
  AUTOGLM_ASSIGN_OR_RETURN(Dfa result, branch_dfa(std::move(branches[0]), budget));
  for (size_t k = 1; k < branches.size(); ++k) {
    AUTOGLM_ASSIGN_OR_RETURN(const Dfa next, branch_dfa(std::move(branches[k]), budget));
    AUTOGLM_ASSIGN_OR_RETURN(result, combine(result, next, Combine::kEither, budget, "pattern"));
  }
  return result;
}

Result<Dfa> compile_regex(const std::string& pattern, const AutomatonLimits& limits) {
  AutomatonBudget budget(limits);
  return compile_regex(pattern, budget);
}

}  // namespace autoglm
