#include "chat/jinja/builtins.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>

#include "chat/jinja/limits.h"

namespace autoglm::jinja {
namespace {

const std::string kWhitespace = " \t\n\r\f\v";

std::string strip(const std::string& s, const std::string& chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left) b = s.find_first_not_of(chars);
  if (b == std::string::npos) return "";
  if (right) e = s.find_last_not_of(chars) + 1;
  return s.substr(b, e - b);
}

std::string chars_arg(const CallArgs& a) {
  const Value* c = a.get(0, "chars");
  return c && c->is_string() ? c->as_string() : kWhitespace;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string title(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c));
    c = char(alpha && start ? std::toupper(static_cast<unsigned char>(c))
                            : std::tolower(static_cast<unsigned char>(c)));
    start = !alpha;
  }
  return out;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    check_string_size(out.size() + (hit - pos) + to.size(), "replace");
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
  }
  return out + s.substr(pos);
}

Value split(const std::string& s, const Value* sep, int64_t max_split) {
  Array parts;
  if (!sep || sep->is_none() || sep->is_undefined()) {  // runs of whitespace
    size_t i = 0;
    while (true) {
      i = s.find_first_not_of(kWhitespace, i);
      if (i == std::string::npos) break;
      if (max_split >= 0 && int64_t(parts.size()) == max_split) {
        parts.emplace_back(strip(s.substr(i), kWhitespace, false, true));
        break;
      }
      const size_t e = s.find_first_of(kWhitespace, i);
      parts.emplace_back(s.substr(i, e == std::string::npos ? std::string::npos : e - i));
      if (e == std::string::npos) break;
      i = e;
    }
    return Value::array(std::move(parts));
  }
  const std::string& d = sep->as_string();
  if (d.empty()) throw Error("split: empty separator");
  size_t pos = 0;
  for (;;) {
    const size_t hit = s.find(d, pos);
    if (hit == std::string::npos || (max_split >= 0 && int64_t(parts.size()) == max_split)) break;
    parts.emplace_back(s.substr(pos, hit - pos));
    pos = hit + d.size();
  }
  parts.emplace_back(s.substr(pos));
  return Value::array(std::move(parts));
}

bool starts_or_ends(const std::string& s, const Value& arg, bool starts) {
  auto one = [&](const std::string& p) {
    if (p.size() > s.size()) return false;
    return starts ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (arg.is_array()) {
    for (const auto& p : arg.as_array())
      if (p.is_string() && one(p.as_string())) return true;
    return false;
  }
  return arg.is_string() && one(arg.as_string());
}

const Value& require(const CallArgs& a, size_t i, const char* name, const char* fn) {
  const Value* v = a.get(i, name);
  if (!v) throw Error(std::string(fn) + ": missing argument '" + name + "'");
  return *v;
}

Value string_method(const std::string& s, const std::string& name) {
  auto bind = [](auto fn) { return Value::function(fn); };
  if (name == "strip") return bind([s](const CallArgs& a) { return Value(strip(s, chars_arg(a), true, true)); });
  if (name == "lstrip") return bind([s](const CallArgs& a) { return Value(strip(s, chars_arg(a), true, false)); });
  if (name == "rstrip") return bind([s](const CallArgs& a) { return Value(strip(s, chars_arg(a), false, true)); });
  if (name == "upper") return bind([s](const CallArgs&) { return Value(upper(s)); });
  if (name == "lower") return bind([s](const CallArgs&) { return Value(lower(s)); });
  if (name == "title") return bind([s](const CallArgs&) { return Value(title(s)); });
  if (name == "capitalize")
    return bind([s](const CallArgs&) {
      std::string r = lower(s);
      if (!r.empty()) r[0] = char(std::toupper(static_cast<unsigned char>(r[0])));
      return Value(r);
    });
  if (name == "startswith")
    return bind(
        [s](const CallArgs& a) { return Value(starts_or_ends(s, require(a, 0, "prefix", "startswith"), true)); });
  if (name == "endswith")
    return bind(
        [s](const CallArgs& a) { return Value(starts_or_ends(s, require(a, 0, "suffix", "endswith"), false)); });
  if (name == "split")
    return bind([s](const CallArgs& a) {
      const Value* max = a.get(1, "maxsplit");
      return split(s, a.get(0, "sep"), max && max->is_number() ? max->as_int() : -1);
    });
  if (name == "replace")
    return bind([s](const CallArgs& a) {
      const Value* count = a.get(2, "count");
      return Value(replace_all(s, require(a, 0, "old", "replace").str(), require(a, 1, "new", "replace").str(),
                               count && count->is_number() ? count->as_int() : -1));
    });
  if (name == "find")
    return bind([s](const CallArgs& a) {
      const size_t hit = s.find(require(a, 0, "sub", "find").str());
      return Value(hit == std::string::npos ? int64_t(-1) : int64_t(hit));
    });
  if (name == "count")
    return bind([s](const CallArgs& a) {
      const std::string sub = require(a, 0, "sub", "count").str();
      int64_t n = 0;
      for (size_t p = sub.empty() ? std::string::npos : s.find(sub); p != std::string::npos;
           p = s.find(sub, p + sub.size()))
        ++n;
      return Value(n);
    });
  if (name == "join")
    return bind([s](const CallArgs& a) {
      std::string out;
      const Value& items = require(a, 0, "iterable", "join");
      if (items.is_array())
        for (size_t i = 0; i < items.as_array().size(); ++i) {
          out += (i ? s : "") + items.as_array()[i].str();
          check_string_size(out.size(), "join");
        }
      return Value(out);
    });
  return Value();
}

Value dict_method(const Value& d, const std::string& name) {
  const Object& o = d.as_object();
  if (name == "items")
    return Value::function([d](const CallArgs&) {
      Array pairs;
      for (const auto& [k, v] : d.as_object().items) pairs.push_back(Value::array({Value(k), v}));
      return Value::array(std::move(pairs));
    });
  if (name == "keys")
    return Value::function([d](const CallArgs&) {
      Array keys;
      for (const auto& [k, v] : d.as_object().items) keys.emplace_back(k);
      return Value::array(std::move(keys));
    });
  if (name == "values")
    return Value::function([d](const CallArgs&) {
      Array values;
      for (const auto& [k, v] : d.as_object().items) values.push_back(v);
      return Value::array(std::move(values));
    });
  if (name == "get")
    return Value::function([d](const CallArgs& a) {
      const Value* v = d.as_object().find(require(a, 0, "key", "get").str());
      if (v) return *v;
      const Value* dflt = a.get(1, "default");
      return dflt ? *dflt : Value::none();
    });
  (void)o;
  return Value();
}

// The value at a dotted attribute path ("function.name").
Value attribute_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t pos = 0;
  while (pos <= path.size()) {
    const size_t dot = path.find('.', pos);
    cur = get_attribute(cur, path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos));
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return cur;
}

// select / reject / selectattr / rejectattr: keep items whose test result equals `keep`.
Value filter_items(const Value& v, const CallArgs& a, bool by_attribute, bool keep, const char* name) {
  CallArgs rest;
  size_t first_test_arg = by_attribute ? 1 : 0;
  std::string attr;
  if (by_attribute) attr = require(a, 0, "attribute", name).str();
  const Value* test = a.get(first_test_arg, nullptr);
  for (size_t i = first_test_arg + 1; i < a.positional.size(); ++i) rest.positional.push_back(a.positional[i]);
  Array out;
  for (const auto& item : iterate(v, name)) {
    const Value subject = by_attribute ? attribute_path(item, attr) : item;
    const bool pass = test ? run_test(test->str(), subject, rest) : subject.truthy();
    if (pass == keep) out.push_back(item);
  }
  return Value::array(std::move(out));
}

std::string indent_text(const std::string& s, const std::string& pad, bool first, bool blank) {
  std::string out;
  size_t pos = 0;
  bool first_line = true;
  while (pos <= s.size()) {
    const size_t nl = s.find('\n', pos);
    const std::string line = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    const bool indent = (first_line ? first : true) && (blank || !line.empty());
    if (!first_line) out += '\n';
    out += (indent ? pad : "") + line;
    check_string_size(out.size(), "indent");
    first_line = false;
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return out;
}

}  // namespace

Array iterate(const Value& v, const char* what) {
  if (v.is_array()) return v.as_array();
  if (v.is_object()) {
    Array keys;
    for (const auto& [k, unused] : v.as_object().items) keys.emplace_back(k);
    return keys;
  }
  if (v.is_string()) {
    Array chars;
    for (char c : v.as_string()) chars.emplace_back(std::string(1, c));
    return chars;
  }
  if (v.is_undefined() || v.is_none()) return {};
  throw Error(std::string(what) + ": cannot iterate over a " + v.type_name());
}

bool run_test(const std::string& name, const Value& v, const CallArgs& a) {
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind() == K::kInt;
  if (name == "float") return v.kind() == K::kFloat;
  if (name == "boolean") return v.kind() == K::kBool;
  if (name == "true") return v.kind() == K::kBool && v.as_bool();
  if (name == "false") return v.kind() == K::kBool && !v.as_bool();
  if (name == "mapping") return v.is_object();
  if (name == "sequence") return v.is_array() || v.is_string() || v.is_object();
  if (name == "iterable") return v.is_array() || v.is_string() || v.is_object();
  if (name == "callable") return v.is_function();
  if (name == "even") return v.is_number() && v.as_int() % 2 == 0;
  if (name == "odd") return v.is_number() && v.as_int() % 2 != 0;
  if (name == "lower") return v.is_string() && lower(v.as_string()) == v.as_string();
  if (name == "upper") return v.is_string() && upper(v.as_string()) == v.as_string();
  if (name == "divisibleby") {
    const int64_t d = require(a, 0, "num", "divisibleby").as_int();
    if (d == 0) throw Error("divisibleby(0): division by zero");
    return v.is_number() && (d == -1 || v.as_int() % d == 0);
  }
  if (name == "eq" || name == "equalto" || name == "sameas" || name == "==")
    return equal(v, require(a, 0, "other", "eq"));
  if (name == "ne" || name == "!=") return !equal(v, require(a, 0, "other", "ne"));
  if (name == "in") {
    const Value& c = require(a, 0, "seq", "in");
    if (c.is_string()) return v.is_string() && c.as_string().find(v.as_string()) != std::string::npos;
    for (const auto& x : iterate(c, "in"))
      if (equal(x, v)) return true;
    return false;
  }
  throw Error("unknown test '" + name + "'");
}

Value run_filter(const std::string& name, const Value& v, const CallArgs& a) {
  if (name == "tojson") {
    const Value* indent = a.get(0, "indent");
    const int64_t spaces = indent && indent->is_number() ? indent->as_int() : -1;
    if (spaces > 1024) throw Error("tojson: indent must be at most 1024");
    return Value(to_json(v, int(spaces)));
  }
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value(int64_t(v.as_string().size()));
    if (v.is_array()) return Value(int64_t(v.as_array().size()));
    if (v.is_object()) return Value(int64_t(v.as_object().items.size()));
    if (v.is_undefined()) return Value(int64_t(0));
    throw Error(std::string("length of a ") + v.type_name());
  }
  if (name == "trim") return Value(strip(v.str(), chars_arg(a), true, true));
  if (name == "string") return Value(v.str());
  if (name == "safe" || name == "e" || name == "escape") return v;
  if (name == "lower") return Value(lower(v.str()));
  if (name == "upper") return Value(upper(v.str()));
  if (name == "title") return Value(title(v.str()));
  if (name == "capitalize") {
    std::string r = lower(v.str());
    if (!r.empty()) r[0] = char(std::toupper(static_cast<unsigned char>(r[0])));
    return Value(r);
  }
  if (name == "int") {
    if (v.is_number() || v.kind() == Value::Kind::kBool) return Value(v.as_int());
    try {
      return Value(int64_t(std::stoll(v.str())));
    } catch (...) {
      return Value(int64_t(0));
    }
  }
  if (name == "float") {
    if (v.is_number()) return Value(v.as_float());
    try {
      return Value(std::stod(v.str()));
    } catch (...) {
      return Value(0.0);
    }
  }
  if (name == "abs") {
    if (v.kind() == Value::Kind::kFloat) return Value(std::abs(v.as_float()));
    if (v.as_int() == INT64_MIN) throw Error("abs: the integer result is out of range");
    return Value(std::abs(v.as_int()));
  }
  if (name == "default" || name == "d") {
    const Value* boolean = a.get(1, "boolean");
    const bool use_default = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
    const Value* dflt = a.get(0, "default_value");
    return use_default ? (dflt ? *dflt : Value("")) : v;
  }
  if (name == "items") {
    if (v.is_undefined() || v.is_none()) return Value::array();
    if (!v.is_object()) throw Error(std::string("items of a ") + v.type_name());
    return dict_method(v, "items").as_function()(CallArgs{});
  }
  if (name == "list") return Value::array(iterate(v, "list"));
  if (name == "first" || name == "last") {
    const Array items = iterate(v, name.c_str());
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    const Value* sep = a.get(0, "d");
    const Value* attr = a.get(1, "attribute");
    std::string out;
    const Array items = iterate(v, "join");
    for (size_t i = 0; i < items.size(); ++i) {
      out += (i && sep ? sep->str() : "") + (attr ? attribute_path(items[i], attr->str()) : items[i]).str();
      check_string_size(out.size(), "join");
    }
    return Value(out);
  }
  if (name == "replace") {
    const Value* count = a.get(2, "count");
    return Value(replace_all(v.str(), require(a, 0, "old", "replace").str(), require(a, 1, "new", "replace").str(),
                             count && count->is_number() ? count->as_int() : -1));
  }
  if (name == "indent") {
    const Value* width = a.get(0, "width");
    const Value* first = a.get(1, "first");
    const Value* blank = a.get(2, "blank");
    const int64_t spaces = width && !width->is_string() ? width->as_int() : 4;
    if (spaces < 0 || spaces > 1024) throw Error("indent: width must be between 0 and 1024");
    const std::string pad = width && width->is_string() ? width->as_string() : std::string(size_t(spaces), ' ');
    return Value(indent_text(v.str(), pad, first && first->truthy(), blank && blank->truthy()));
  }
  if (name == "select") return filter_items(v, a, false, true, "select");
  if (name == "reject") return filter_items(v, a, false, false, "reject");
  if (name == "selectattr") return filter_items(v, a, true, true, "selectattr");
  if (name == "rejectattr") return filter_items(v, a, true, false, "rejectattr");
  if (name == "map") {
    Array out;
    const Value* attr = a.get(99, "attribute");
    const Value* filter = a.get(0, nullptr);
    CallArgs rest;
    for (size_t i = 1; i < a.positional.size(); ++i) rest.positional.push_back(a.positional[i]);
    for (const auto& item : iterate(v, "map")) {
      if (attr) {
        Value x = attribute_path(item, attr->str());
        const Value* dflt = a.get(99, "default");
        out.push_back(x.is_undefined() && dflt ? *dflt : x);
      } else if (filter) {
        out.push_back(run_filter(filter->str(), item, rest));
      } else {
        out.push_back(item);
      }
    }
    return Value::array(std::move(out));
  }
  if (name == "unique") {
    Array out;
    for (const auto& item : iterate(v, "unique"))
      if (std::none_of(out.begin(), out.end(), [&](const Value& x) { return equal(x, item); })) out.push_back(item);
    return Value::array(std::move(out));
  }
  if (name == "reverse") {
    if (v.is_string()) return Value(std::string(v.as_string().rbegin(), v.as_string().rend()));
    Array items = iterate(v, "reverse");
    std::reverse(items.begin(), items.end());
    return Value::array(std::move(items));
  }
  if (name == "sort") {
    Array items = iterate(v, "sort");
    const Value* attr = a.get(99, "attribute");
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      return attr ? compare(attribute_path(x, attr->str()), attribute_path(y, attr->str())) < 0 : compare(x, y) < 0;
    });
    return Value::array(std::move(items));
  }
  if (name == "dictsort") {
    if (!v.is_object()) throw Error("dictsort needs a dict");
    auto items = v.as_object().items;
    std::stable_sort(items.begin(), items.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    Array out;
    for (const auto& [k, val] : items) out.push_back(Value::array({Value(k), val}));
    return Value::array(std::move(out));
  }
  if (name == "wordcount") return Value(int64_t(split(v.str(), nullptr, -1).as_array().size()));
  throw Error("unknown filter '" + name + "'");
}

Value get_attribute(const Value& v, const std::string& name) {
  if (v.is_object()) {
    if (const Value* found = v.as_object().find(name)) return *found;
    return dict_method(v, name);
  }
  if (v.is_string()) return string_method(v.as_string(), name);
  if (v.is_undefined() || v.is_none()) return Value();
  return Value();
}

void add_globals(Object& scope) {
  scope.set("raise_exception", Value::function([](const CallArgs& a) -> Value {
              const Value* m = a.get(0, "message");
              throw Error("raise_exception: " + (m ? m->str() : std::string("template error")));
            }));
  scope.set("namespace", Value::function([](const CallArgs& a) {
              Object o;
              for (const auto& [k, v] : a.named) o.set(k, v);
              return Value::object(std::move(o));
            }));
  scope.set("dict", Value::function([](const CallArgs& a) {
              Object o;
              for (const auto& [k, v] : a.named) o.set(k, v);
              return Value::object(std::move(o));
            }));
  scope.set("range", Value::function([](const CallArgs& a) {
              int64_t start = 0, stop = 0, step = 1;
              if (a.positional.size() == 1) {
                stop = a.positional[0].as_int();
              } else if (a.positional.size() >= 2) {
                start = a.positional[0].as_int();
                stop = a.positional[1].as_int();
                if (a.positional.size() > 2) step = a.positional[2].as_int();
              }
              if (step == 0) throw Error("range: step cannot be zero");
              const double items = std::ceil((double(stop) - double(start)) / double(step));
              if (items > double(kMaxListItems))
                throw Error("range: " + std::to_string(int64_t(items)) + " items exceed the limit of " +
                            std::to_string(kMaxListItems));
              Array out;
              for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
              return Value::array(std::move(out));
            }));
  scope.set("strftime_now", Value::function([](const CallArgs& a) {
              const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
              std::tm tm{};
              localtime_r(&now, &tm);
              char buf[128];
              const Value* fmt = a.get(0, "format");
              const size_t n = std::strftime(buf, sizeof(buf), fmt ? fmt->str().c_str() : "%Y-%m-%d", &tm);
              return Value(std::string(buf, n));
            }));
}

}  // namespace autoglm::jinja
