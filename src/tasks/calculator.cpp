#include "tasks/calculator.h"

#include <cmath>
#include <cstdlib>

namespace autoglm {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  Result<double> run() {
    AUTOGLM_ASSIGN_OR_RETURN(const double v, sum(0));
    skip();
    if (i_ != s_.size()) return fail("unexpected '" + std::string(1, s_[i_]) + "'");
    if (!std::isfinite(v)) return invalid_argument("expression: the result is not a finite number");
    return v;
  }

 private:
  Status fail(const std::string& what) const {
    return invalid_argument("expression: " + what + " at offset " + std::to_string(i_));
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }

  Result<double> sum(int depth) {
    AUTOGLM_ASSIGN_OR_RETURN(double v, product(depth));
    for (;;) {
      if (eat('+')) {
        AUTOGLM_ASSIGN_OR_RETURN(const double r, product(depth));
        v += r;
      } else if (eat('-')) {
        AUTOGLM_ASSIGN_OR_RETURN(const double r, product(depth));
        v -= r;
      } else {
        return v;
      }
    }
  }

  Result<double> product(int depth) {
    AUTOGLM_ASSIGN_OR_RETURN(double v, unary(depth));
    for (;;) {
      const bool mul = eat('*'), div = !mul && eat('/'), mod = !mul && !div && eat('%');
      if (!mul && !div && !mod) return v;
      AUTOGLM_ASSIGN_OR_RETURN(const double r, unary(depth));
      if ((div || mod) && r == 0) return fail("division by zero");
      v = mul ? v * r : div ? v / r : std::fmod(v, r);
    }
  }

  // Signs bind looser than powers: -2^2 is -(2^2).
  Result<double> unary(int depth) {
    if (depth > 100) return fail("nesting too deep");
    if (eat('-')) {
      AUTOGLM_ASSIGN_OR_RETURN(const double v, unary(depth + 1));
      return -v;
    }
    if (eat('+')) return unary(depth + 1);
    return power(depth);
  }

  Result<double> power(int depth) {
    AUTOGLM_ASSIGN_OR_RETURN(const double base, primary(depth));
    if (!eat('^')) return base;
    AUTOGLM_ASSIGN_OR_RETURN(const double exponent, unary(depth + 1));  // right-associative
    return std::pow(base, exponent);
  }

  Result<double> primary(int depth) {
    if (eat('(')) {
      AUTOGLM_ASSIGN_OR_RETURN(const double v, sum(depth + 1));
      if (!eat(')')) return fail("expected ')'");
      return v;
    }
    skip();
    const char* start = s_.c_str() + i_;
    char* end = nullptr;
    if (i_ >= s_.size() || !(std::isdigit(static_cast<unsigned char>(*start)) || *start == '.'))
      return fail(i_ >= s_.size() ? "expected a number" : "unexpected '" + std::string(1, *start) + "'");
    const double v = std::strtod(start, &end);
    i_ += size_t(end - start);
    return v;
  }

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace

Result<double> evaluate_arithmetic(const std::string& expression) {
  return Parser(expression).run();
}

}  // namespace autoglm
