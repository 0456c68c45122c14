#include "chat/jinja/parser.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "chat/jinja/limits.h"

namespace autoglm::jinja {
namespace {

// ---- Splitting the source into text and tags, applying whitespace control ----

struct Segment {
  enum class Kind { kText, kExpr, kStmt } kind;
  std::string text;
  int line;
};

bool is_keyword(const std::string& s) {
  return s == "and" || s == "or" || s == "else" || s == "if" || s == "not" || s == "in" || s == "is";
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Index just past the closer of a tag whose body starts at `from`; quotes are skipped.
size_t find_closer(const std::string& s, size_t from, const char* closer, int line) {
  char quote = 0;
  for (size_t i = from; i + 1 < s.size(); ++i) {
    if (quote) {
      if (s[i] == '\\')
        ++i;
      else if (s[i] == quote)
        quote = 0;
      continue;
    }
    if (s[i] == '\'' || s[i] == '"')
      quote = s[i];
    else if (s[i] == closer[0] && s[i + 1] == closer[1])
      return i;
  }
  throw Error("line " + std::to_string(line) + ": unclosed tag (expected '" + closer + "')");
}

std::vector<Segment> split_segments(const std::string& src) {
  std::vector<Segment> out;
  size_t pos = 0;
  int line = 1;
  auto count_lines = [&](size_t a, size_t b) {
    for (size_t i = a; i < b; ++i) line += src[i] == '\n';
  };
  while (pos < src.size()) {
    size_t at = pos;
    while (at + 1 < src.size() && !(src[at] == '{' && (src[at + 1] == '{' || src[at + 1] == '%' || src[at + 1] == '#')))
      ++at;
    if (at + 1 >= src.size()) at = src.size();
    std::string text = src.substr(pos, at - pos);
    const int text_line = line;
    count_lines(pos, at);
    if (at >= src.size()) {
      if (!text.empty()) out.push_back({Segment::Kind::kText, text, text_line});
      break;
    }
    const char type = src[at + 1];
    const char mark = at + 2 < src.size() ? src[at + 2] : 0;
    const bool block = type != '{';
    if (mark == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (block && mark != '+') {
      // lstrip_blocks: spaces and tabs between the start of the source line and a block tag go.
      size_t k = at;
      while (k > pos && (src[k - 1] == ' ' || src[k - 1] == '\t')) --k;
      if (k == 0 || src[k - 1] == '\n') text.erase(text.size() - (at - k));
    }
    if (!text.empty()) out.push_back({Segment::Kind::kText, text, text_line});
    const size_t body = at + 2 + ((mark == '-' || mark == '+') ? 1 : 0);
    const char* closer = type == '{' ? "}}" : type == '%' ? "%}" : "#}";
    size_t close = type == '#' ? src.find("#}", body) : find_closer(src, body, closer, line);
    if (close == std::string::npos) throw Error("line " + std::to_string(line) + ": unclosed comment");
    const bool strip_after = close > body && src[close - 1] == '-';
    const bool keep_newline = close > body && src[close - 1] == '+';
    const size_t inner_end = (strip_after || keep_newline) ? close - 1 : close;
    if (type != '#')
      out.push_back(
          {type == '{' ? Segment::Kind::kExpr : Segment::Kind::kStmt, src.substr(body, inner_end - body), line});
    count_lines(at, close + 2);
    pos = close + 2;
    if (strip_after) {
      while (pos < src.size() && is_space(src[pos])) {
        line += src[pos] == '\n';
        ++pos;
      }
    } else if (block && !keep_newline && pos < src.size() && src[pos] == '\n') {  // trim_blocks
      ++pos;
      ++line;
    }
  }
  return out;
}

// ---- Tokens of an expression or statement ----

struct Token {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd } kind;
  std::string text;
  Value value;
};

// Digits only (underscores removed); more than an int64 holds is an error, not a throw out of
// the parser.
int64_t integer_literal(const std::string& digits, int line) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size())
    throw Error("line " + std::to_string(line) + ": the integer " + digits.substr(0, 32) +
                (digits.size() > 32 ? "..." : "") + " is out of range");
  return v;
}

std::vector<Token> tokenize(const std::string& s, int line) {
  std::vector<Token> out;
  size_t i = 0;
  auto fail = [&](const std::string& m) { throw Error("line " + std::to_string(line) + ": " + m); };
  while (i < s.size()) {
    const char c = s[i];
    if (is_space(c)) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Token::Kind::kName, s.substr(i, j - i), {}});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      bool is_float = false;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      std::string num = s.substr(i, j - i);
      num.erase(std::remove(num.begin(), num.end(), '_'), num.end());
      out.push_back(is_float ? Token{Token::Kind::kFloat, num, Value(std::strtod(num.c_str(), nullptr))}
                             : Token{Token::Kind::kInt, num, Value(integer_literal(num, line))});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string str;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] != '\\' || j + 1 >= s.size()) {
          str += s[j];
          continue;
        }
        const char e = s[++j];
        switch (e) {
          case 'n': str += '\n'; break;
          case 't': str += '\t'; break;
          case 'r': str += '\r'; break;
          case '\\': str += '\\'; break;
          case '\'': str += '\''; break;
          case '"': str += '"'; break;
          default: str += '\\', str += e;
        }
      }
      if (j >= s.size()) fail("unterminated string");
      out.push_back({Token::Kind::kString, str, Value(str)});
      i = j + 1;
    } else {
      static const char* two[] = {"==", "!=", "<=", ">=", "//", "**"};
      std::string op(1, c);
      for (const char* t : two)
        if (s.compare(i, 2, t) == 0) op = t;
      if (op.size() == 1 && !std::strchr("+-*/%<>()[]{},.:|~=", c))
        fail(std::string("unexpected character '") + c + "'");
      out.push_back({Token::Kind::kOp, op, {}});
      i += op.size();
    }
  }
  out.push_back({Token::Kind::kEnd, "", {}});
  return out;
}

// ---- Expressions ----

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, int line) : t_(std::move(tokens)), line_(line) {}

  const Token& peek(size_t k = 0) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  bool at_end() const { return peek().kind == Token::Kind::kEnd; }
  bool is_op(const char* op, size_t k = 0) const { return peek(k).kind == Token::Kind::kOp && peek(k).text == op; }
  bool is_name(const char* n, size_t k = 0) const { return peek(k).kind == Token::Kind::kName && peek(k).text == n; }
  bool accept_op(const char* op) { return is_op(op) ? (++p_, true) : false; }
  bool accept_name(const char* n) { return is_name(n) ? (++p_, true) : false; }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(std::string("expected '") + op + "', found '" + peek().text + "'");
  }
  std::string expect_name() {
    if (peek().kind != Token::Kind::kName) fail("expected a name, found '" + peek().text + "'");
    return t_[p_++].text;
  }
  [[noreturn]] void fail(const std::string& m) const { throw Error("line " + std::to_string(line_) + ": " + m); }
  void expect_end() {
    if (!at_end()) fail("unexpected '" + peek().text + "'");
  }

  ExprPtr expression() { return conditional(); }
  // The iterable of a for loop: no "x if y else z", since "if" there filters the loop.
  ExprPtr expression_without_condition() { return logical_or(); }

  // A comma-separated list without brackets becomes a list ("a, b" in set/for).
  ExprPtr expression_or_tuple() {
    ExprPtr first = expression();
    if (!is_op(",")) return first;
    auto list = std::make_unique<Expr>(Expr::Kind::kList);
    list->args.push_back(std::move(first));
    while (accept_op(",")) list->args.push_back(expression());
    return list;
  }

 private:
  ExprPtr make(Expr::Kind k) { return std::make_unique<Expr>(k); }

  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = make(Expr::Kind::kBinary);
    e->name = op;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr conditional() {
    ExprPtr value = logical_or();
    if (!accept_name("if")) return value;
    auto e = make(Expr::Kind::kCond);
    e->args.push_back(logical_or());
    e->args.push_back(std::move(value));
    e->args.push_back(accept_name("else") ? conditional() : make(Expr::Kind::kLiteral));
    return e;
  }

  ExprPtr logical_or() {
    ExprPtr e = logical_and();
    while (accept_name("or")) e = binary("or", std::move(e), logical_and());
    return e;
  }

  ExprPtr logical_and() {
    ExprPtr e = logical_not();
    while (accept_name("and")) e = binary("and", std::move(e), logical_not());
    return e;
  }

  ExprPtr logical_not() {
    NestingGuard guard(depth_, kMaxParseDepth, "line " + std::to_string(line_) + ": expressions");
    if (accept_name("not")) {
      auto e = make(Expr::Kind::kNot);
      e->args.push_back(logical_not());
      return e;
    }
    return comparison();
  }

  ExprPtr comparison() {
    ExprPtr e = additive();
    for (;;) {
      static const char* ops[] = {"==", "!=", "<", ">", "<=", ">="};
      bool matched = false;
      for (const char* op : ops)
        if (accept_op(op)) {
          e = binary(op, std::move(e), additive());
          matched = true;
          break;
        }
      if (matched) continue;
      if (accept_name("in")) {
        e = binary("in", std::move(e), additive());
      } else if (is_name("not") && is_name("in", 1)) {
        p_ += 2;
        e = binary("not in", std::move(e), additive());
      } else {
        return e;
      }
    }
  }

  ExprPtr additive() {
    ExprPtr e = concat();
    for (;;) {
      if (accept_op("+"))
        e = binary("+", std::move(e), concat());
      else if (accept_op("-"))
        e = binary("-", std::move(e), concat());
      else
        return e;
    }
  }

  ExprPtr concat() {
    ExprPtr e = multiplicative();
    while (accept_op("~")) e = binary("~", std::move(e), multiplicative());
    return e;
  }

  ExprPtr multiplicative() {
    ExprPtr e = power();
    for (;;) {
      static const char* ops[] = {"*", "/", "//", "%"};
      bool matched = false;
      for (const char* op : ops)
        if (accept_op(op)) {
          e = binary(op, std::move(e), power());
          matched = true;
          break;
        }
      if (!matched) return e;
    }
  }

  ExprPtr power() {
    ExprPtr e = unary();
    while (accept_op("**")) e = binary("**", std::move(e), unary());
    return e;
  }

  ExprPtr unary() {
    NestingGuard guard(depth_, kMaxParseDepth, "line " + std::to_string(line_) + ": expressions");
    if (accept_op("-")) {
      auto e = make(Expr::Kind::kNeg);
      e->args.push_back(unary());
      return filters_and_tests(std::move(e));
    }
    if (accept_op("+")) return unary();
    return filters_and_tests(postfix(primary()));
  }

  void call_arguments(Expr& e) {
    // After '(': positional and name=value arguments up to ')'.
    while (!accept_op(")")) {
      if (peek().kind == Token::Kind::kName && is_op("=", 1)) {
        std::string name = expect_name();
        expect_op("=");
        e.named.emplace_back(name, expression());
      } else {
        e.args.push_back(expression());
      }
      if (!is_op(")")) expect_op(",");
    }
  }

  ExprPtr filters_and_tests(ExprPtr e) {
    for (;;) {
      if (accept_op("|")) {
        auto f = make(Expr::Kind::kFilter);
        f->name = expect_name();
        f->args.push_back(std::move(e));
        if (accept_op("(")) call_arguments(*f);
        e = std::move(f);
      } else if (accept_name("is")) {
        auto t = make(Expr::Kind::kTest);
        t->negated = accept_name("not");
        t->name = expect_name();
        t->args.push_back(std::move(e));
        const Token& next = peek();
        if (accept_op("(")) {
          call_arguments(*t);
        } else if (next.kind == Token::Kind::kString || next.kind == Token::Kind::kInt ||
                   next.kind == Token::Kind::kFloat || (next.kind == Token::Kind::kName && !is_keyword(next.text))) {
          t->args.push_back(primary());  // "is divisibleby 3", "is sameas none"
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (accept_op(".")) {
        auto a = make(Expr::Kind::kAttr);
        if (peek().kind == Token::Kind::kInt) {  // x.0
          a = make(Expr::Kind::kIndex);
          a->args.push_back(std::move(e));
          auto lit = make(Expr::Kind::kLiteral);
          lit->value = t_[p_++].value;
          a->args.push_back(std::move(lit));
          e = std::move(a);
          continue;
        }
        a->name = expect_name();
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (accept_op("[")) {
        e = subscript(std::move(e));
      } else if (accept_op("(")) {
        auto c = make(Expr::Kind::kCall);
        c->args.push_back(std::move(e));
        call_arguments(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr target) {
    ExprPtr parts[3];
    int n = 0;
    bool slice = false;
    for (;;) {
      if (is_op(":")) {
        slice = true;
        ++p_;
        if (++n > 2) fail("too many ':' in slice");
        continue;
      }
      if (is_op("]")) break;
      parts[n] = expression();
      if (!is_op(":") && !is_op("]")) fail("expected ':' or ']'");
    }
    expect_op("]");
    if (!slice) {
      if (!parts[0]) fail("empty subscript '[]'");
      auto e = make(Expr::Kind::kIndex);
      e->args.push_back(std::move(target));
      e->args.push_back(std::move(parts[0]));
      return e;
    }
    auto e = make(Expr::Kind::kSlice);
    e->args.push_back(std::move(target));
    for (auto& part : parts) e->args.push_back(std::move(part));
    return e;
  }

  ExprPtr primary() {
    const Token& tok = peek();
    if (tok.kind == Token::Kind::kString || tok.kind == Token::Kind::kInt || tok.kind == Token::Kind::kFloat) {
      auto e = make(Expr::Kind::kLiteral);
      e->value = tok.value;
      ++p_;
      // Adjacent string literals concatenate.
      while (tok.kind == Token::Kind::kString && peek().kind == Token::Kind::kString)
        e->value = Value(e->value.as_string() + t_[p_++].text);
      return e;
    }
    if (tok.kind == Token::Kind::kName) {
      ++p_;
      auto e = make(Expr::Kind::kLiteral);
      if (tok.text == "true" || tok.text == "True")
        e->value = Value(true);
      else if (tok.text == "false" || tok.text == "False")
        e->value = Value(false);
      else if (tok.text == "none" || tok.text == "None")
        e->value = Value::none();
      else {
        e = make(Expr::Kind::kName);
        e->name = tok.text;
      }
      return e;
    }
    if (accept_op("(")) {
      if (accept_op(")")) return make(Expr::Kind::kList);
      ExprPtr first = expression();
      if (accept_op(")")) return first;
      auto list = make(Expr::Kind::kList);  // a tuple
      list->args.push_back(std::move(first));
      while (accept_op(",")) {
        if (is_op(")")) break;
        list->args.push_back(expression());
      }
      expect_op(")");
      return list;
    }
    if (accept_op("[")) {
      auto list = make(Expr::Kind::kList);
      while (!accept_op("]")) {
        list->args.push_back(expression());
        if (!is_op("]")) expect_op(",");
      }
      return list;
    }
    if (accept_op("{")) {
      auto dict = make(Expr::Kind::kDict);
      while (!accept_op("}")) {
        dict->args.push_back(expression());
        expect_op(":");
        dict->args.push_back(expression());
        if (!is_op("}")) expect_op(",");
      }
      return dict;
    }
    fail("unexpected '" + tok.text + "' in expression");
  }

  std::vector<Token> t_;
  size_t p_ = 0;
  int line_;
  int depth_ = 0;
};

// ---- Statements ----

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Segment> segs) : segs_(std::move(segs)) {}

  Body parse_all() {
    Body body = parse_body({});
    if (pos_ < segs_.size()) fail(segs_[pos_].line, "unexpected '" + keyword(segs_[pos_]) + "'");
    return body;
  }

 private:
  [[noreturn]] static void fail(int line, const std::string& m) {
    throw Error("line " + std::to_string(line) + ": " + m);
  }

  static std::string keyword(const Segment& s) {
    size_t i = s.text.find_first_not_of(" \t\r\n");
    if (i == std::string::npos) return "";
    size_t j = i;
    while (j < s.text.size() && (std::isalnum(static_cast<unsigned char>(s.text[j])) || s.text[j] == '_')) ++j;
    return s.text.substr(i, j - i);
  }

  // Parses nodes until a statement whose keyword is in `stops` (left unconsumed).
  Body parse_body(const std::vector<std::string>& stops) {
    NestingGuard guard(depth_, kMaxParseDepth, "blocks");
    Body body;
    while (pos_ < segs_.size()) {
      const Segment& s = segs_[pos_];
      if (s.kind == Segment::Kind::kText) {
        auto n = std::make_unique<Node>(Node::Kind::kText);
        n->text = s.text;
        body.push_back(std::move(n));
        ++pos_;
        continue;
      }
      if (s.kind == Segment::Kind::kExpr) {
        ExprParser p(tokenize(s.text, s.line), s.line);
        auto n = std::make_unique<Node>(Node::Kind::kOutput);
        n->expr = p.expression();
        p.expect_end();
        body.push_back(std::move(n));
        ++pos_;
        continue;
      }
      const std::string kw = keyword(s);
      for (const auto& stop : stops)
        if (kw == stop) return body;
      body.push_back(parse_statement(s, kw));
    }
    if (!stops.empty()) fail(segs_.empty() ? 0 : segs_.back().line, "missing '{% " + stops.back() + " %}'");
    return body;
  }

  void expect_keyword(const std::string& kw) {
    if (pos_ >= segs_.size() || segs_[pos_].kind != Segment::Kind::kStmt || keyword(segs_[pos_]) != kw)
      fail(pos_ < segs_.size() ? segs_[pos_].line : 0, "expected '{% " + kw + " %}'");
    ++pos_;
  }

  std::unique_ptr<Node> parse_statement(const Segment& s, const std::string& kw) {
    ExprParser p(tokenize(s.text, s.line), s.line);
    p.expect_name();
    ++pos_;
    if (kw == "if") return parse_if(p);
    if (kw == "for") return parse_for(p);
    if (kw == "set") return parse_set(p);
    if (kw == "macro") return parse_macro(p);
    if (kw == "filter") {
      auto n = std::make_unique<Node>(Node::Kind::kFilterBlock);
      n->expr = std::make_unique<Expr>(Expr::Kind::kFilter);
      n->expr->name = p.expect_name();
      if (p.accept_op("(")) fail(s.line, "filter blocks with arguments are not supported");
      p.expect_end();
      n->body = parse_body({"endfilter"});
      expect_keyword("endfilter");
      return n;
    }
    if (kw == "break" || kw == "continue") {
      if (loop_depth_ == 0) fail(s.line, "'" + kw + "' outside a for loop");
      p.expect_end();
      return std::make_unique<Node>(kw == "break" ? Node::Kind::kBreak : Node::Kind::kContinue);
    }
    fail(s.line, "unknown statement '" + kw + "'");
  }

  std::unique_ptr<Node> parse_if(ExprParser& p) {
    auto n = std::make_unique<Node>(Node::Kind::kIf);
    ExprPtr cond = p.expression();
    p.expect_end();
    for (;;) {
      Body body = parse_body({"elif", "else", "endif"});
      n->branches.emplace_back(std::move(cond), std::move(body));
      const Segment& s = segs_[pos_];
      const std::string kw = keyword(s);
      ++pos_;
      if (kw == "endif") return n;
      ExprParser q(tokenize(s.text, s.line), s.line);
      q.expect_name();
      if (kw == "else") {
        q.expect_end();
        n->branches.emplace_back(nullptr, parse_body({"endif"}));
        expect_keyword("endif");
        return n;
      }
      cond = q.expression();
      q.expect_end();
    }
  }

  std::unique_ptr<Node> parse_for(ExprParser& p) {
    auto n = std::make_unique<Node>(Node::Kind::kFor);
    do {
      n->targets.push_back(p.expect_name());
    } while (p.accept_op(","));
    if (!p.accept_name("in")) p.fail("expected 'in' in for loop");
    n->expr = p.expression_without_condition();
    if (p.accept_name("if")) n->filter = p.expression();
    if (p.accept_name("recursive")) p.fail("recursive loops are not supported");
    p.expect_end();
    ++loop_depth_;
    n->body = parse_body({"else", "endfor"});
    --loop_depth_;
    if (keyword(segs_[pos_]) == "else") {
      ++pos_;
      n->else_body = parse_body({"endfor"});
    }
    expect_keyword("endfor");
    return n;
  }

  std::unique_ptr<Node> parse_set(ExprParser& p) {
    std::vector<std::string> names{p.expect_name()};
    std::string attribute;
    if (p.accept_op(".")) attribute = p.expect_name();
    while (p.accept_op(",")) names.push_back(p.expect_name());
    if (p.at_end()) {  // block set
      auto n = std::make_unique<Node>(Node::Kind::kSetBlock);
      n->targets = names;
      n->attribute = attribute;
      n->body = parse_body({"endset"});
      expect_keyword("endset");
      return n;
    }
    p.expect_op("=");
    auto n = std::make_unique<Node>(Node::Kind::kSet);
    n->targets = names;
    n->attribute = attribute;
    n->expr = p.expression_or_tuple();
    p.expect_end();
    return n;
  }

  std::unique_ptr<Node> parse_macro(ExprParser& p) {
    auto n = std::make_unique<Node>(Node::Kind::kMacro);
    n->targets.push_back(p.expect_name());
    p.expect_op("(");
    while (!p.accept_op(")")) {
      std::string name = p.expect_name();
      ExprPtr def;
      if (p.accept_op("=")) def = p.expression();
      n->params.emplace_back(name, std::move(def));
      if (!p.is_op(")")) p.expect_op(",");
    }
    p.expect_end();
    const int outer_loops = std::exchange(loop_depth_, 0);  // a macro's body is not inside the caller's loop
    n->body = parse_body({"endmacro"});
    loop_depth_ = outer_loops;
    expect_keyword("endmacro");
    return n;
  }

  std::vector<Segment> segs_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;  // for loops around the statement being parsed (break and continue need one)
};

}  // namespace

Body parse_template(const std::string& source) {
  return TemplateParser(split_segments(source)).parse_all();
}

}  // namespace autoglm::jinja
