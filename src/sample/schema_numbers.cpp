#include "sample/schema_numbers.h"

#include <cmath>

namespace autoglm {
namespace {

constexpr uint64_t kMaxMagnitude = 9999999999999999ull;  // 16 digits, as the unbounded grammar allows
constexpr const char* kAnyFraction = "(?:\\.[0-9]{1,15})?";
constexpr const char* kZeroFraction = "(?:\\.0{1,15})?";
constexpr const char* kNonzeroFraction = "\\.0{0,14}[1-9][0-9]{0,14}";

bool all_of(const std::string& s, char c) {
  return s.find_first_not_of(c) == std::string::npos;
}

// `head` then `rest` as a non-capturing group (built by appending: GCC 12 warns falsely on
// literal + temporary string).
std::string then_group(char head, const std::string& rest) {
  std::string out(1, head);
  out += "(?:";
  out += rest;
  out += ")";
  return out;
}

void add_alternative(std::string& out, const std::string& part) {
  if (!out.empty()) out += "|";
  out += part;
}

// Both strings have the same length.
std::string same_length_range(const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (n == 0) return "";
  if (lo == hi) return lo;
  const std::string rest_lo = lo.substr(1), rest_hi = hi.substr(1);
  if (lo[0] == hi[0]) return then_group(lo[0], same_length_range(rest_lo, rest_hi));
  const std::string tail_any = n > 1 ? "[0-9]{" + std::to_string(n - 1) + "}" : "";
  std::string out;
  auto add = [&](const std::string& part) { add_alternative(out, part); };
  char first = lo[0], last = hi[0];
  if (!all_of(rest_lo, '0')) add(then_group(first, same_length_range(rest_lo, std::string(n - 1, '9')))), ++first;
  const bool hi_full = all_of(rest_hi, '9');
  if (!hi_full) --last;
  if (first <= last) {
    std::string digits = "[";
    digits += first;
    digits += '-';
    digits += last;
    digits += ']';
    add(digits + tail_any);
  }
  if (!hi_full) add(then_group(hi[0], same_length_range(std::string(n - 1, '0'), rest_hi)));
  return out;
}

uint64_t power_of_ten(size_t digits) {
  uint64_t p = 1;
  while (digits-- > 0) p *= 10;
  return p;
}

struct Side {  // a bound on a magnitude
  uint64_t value;
  bool exclusive;
};

// Magnitudes m >= 0 with lower <= m <= upper (upper absent: up to the 16-digit limit).
std::string magnitudes(Side lower, std::optional<Side> upper, bool fraction) {
  std::string out;
  auto add = [&](uint64_t lo, uint64_t hi, const char* frac) {
    if (lo <= hi) out += (out.empty() ? "(?:" : "|(?:") + integer_range_regex(lo, hi) + ")" + frac;
  };
  const uint64_t top = upper ? upper->value : kMaxMagnitude;
  uint64_t first = lower.value;
  if (lower.exclusive) {  // m = lower is excluded, lower + a fraction is not
    if (fraction && (!upper || lower.value < upper->value)) add(lower.value, lower.value, kNonzeroFraction);
    ++first;
  }
  if (!upper) {
    add(first, top, fraction ? kAnyFraction : "");
  } else {
    if (top > 0) add(first, top - 1, fraction ? kAnyFraction : "");
    if (!upper->exclusive) add(std::max(first, top), top, fraction ? kZeroFraction : "");
  }
  return out;
}

bool whole(double v) {
  return std::floor(v) == v;
}

uint64_t clamp_magnitude(double v) {
  return v >= double(kMaxMagnitude) ? kMaxMagnitude : uint64_t(v);
}

}  // namespace

std::string integer_range_regex(uint64_t lo, uint64_t hi) {
  std::string out;
  for (size_t digits = std::to_string(lo).size(); digits <= std::to_string(hi).size(); ++digits) {
    const uint64_t a = std::max(lo, digits == 1 ? 0 : power_of_ten(digits - 1));
    const uint64_t b = std::min(hi, power_of_ten(digits) - 1);
    if (a > b) continue;
    add_alternative(out, same_length_range(std::to_string(a), std::to_string(b)));
  }
  return out;
}

Result<std::string> number_regex(const NumberBounds& b, bool integer) {
  for (const auto& [bound, name] : {std::pair{b.minimum, "minimum"}, std::pair{b.maximum, "maximum"}})
    if (bound && !std::isfinite(*bound)) return invalid_argument(std::string("'") + name + "' must be finite");
  if (!integer)
    for (const auto& [bound, name] : {std::pair{b.minimum, "minimum"}, std::pair{b.maximum, "maximum"}})
      if (bound && !whole(*bound))
        return invalid_argument(std::string("'") + name + "' " + std::to_string(*bound) +
                                " on a number: only whole-number bounds are supported (or use type integer)");
  // Integers: inclusive whole bounds.
  std::optional<double> lo = b.minimum, hi = b.maximum;
  bool lo_excl = b.exclusive_minimum, hi_excl = b.exclusive_maximum;
  if (integer) {
    if (lo) lo = lo_excl && whole(*lo) ? *lo + 1 : std::ceil(*lo);
    if (hi) hi = hi_excl && whole(*hi) ? *hi - 1 : std::floor(*hi);
    lo_excl = hi_excl = false;
  }
  if (lo && hi && (*lo > *hi || (*lo == *hi && (lo_excl || hi_excl))))
    return invalid_argument("no value lies between 'minimum' and 'maximum'");
  std::string out;
  auto add = [&](const std::string& sign, const std::string& m) {
    if (!m.empty()) out += (out.empty() ? "" : "|") + sign + "(?:" + m + ")";
  };
  const bool fraction = !integer;
  if (!hi || *hi >= 0) {  // the values >= 0
    const Side lower = lo && *lo >= 0 ? Side{clamp_magnitude(*lo), lo_excl} : Side{0, false};
    std::optional<Side> upper;
    if (hi) upper = Side{clamp_magnitude(*hi), hi_excl};
    if (!(upper && upper->value == 0 && upper->exclusive)) add("", magnitudes(lower, upper, fraction));
  }
  if (!lo || *lo < 0) {  // the values < 0, as magnitudes
    const Side lower = hi && *hi < 0 ? Side{clamp_magnitude(-*hi), hi_excl} : Side{0, true};
    std::optional<Side> upper;
    if (lo) upper = Side{clamp_magnitude(-*lo), lo_excl};
    if (integer && lower.value == 0)
      add("-", magnitudes({1, false}, upper, false));  // no "-0"
    else
      add("-", magnitudes(lower, upper, fraction));
  }
  if (out.empty()) return invalid_argument("no value lies between 'minimum' and 'maximum'");
  return "^(?:" + out + ")$";
}

Dfa multiple_of_dfa(int64_t divisor) {
  // States: 0 start, 1 after '-', 2 the number 0, 3 + r: digits so far leave remainder r.
  const auto k = uint64_t(divisor);
  Dfa dfa;
  dfa.states.resize(3 + k);
  auto rem = [&](uint64_t r) { return int32_t(3 + r); };
  dfa.states[0].edges = {{{'-', '-'}, 1}, {{'0', '0'}, 2}};
  dfa.states[2].accepting = true;
  for (uint64_t r = 0; r < k; ++r) {
    dfa.states[size_t(rem(r))].accepting = r == 0;
    for (uint32_t d = 0; d <= 9; ++d) {
      const uint64_t next = (r * 10 + d) % k;
      auto& edges = dfa.states[size_t(rem(r))].edges;
      if (!edges.empty() && edges.back().target == rem(next) && edges.back().range.hi + 1 == '0' + d)
        edges.back().range.hi = '0' + d;
      else
        edges.push_back({{'0' + d, '0' + d}, rem(next)});
    }
  }
  for (uint32_t d = 1; d <= 9; ++d)
    for (int32_t from : {0, 1}) dfa.states[size_t(from)].edges.push_back({{'0' + d, '0' + d}, rem(d % k)});
  // Edges must be sorted and disjoint: state 0 has '-' , '0', then 1-9.
  return trim(dfa);
}

}  // namespace autoglm
