#include "chat/jinja/value.h"

#include <charconv>
#include <cmath>

#include "chat/jinja/limits.h"

namespace autoglm::jinja {

const Value* Object::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Object::set(const std::string& key, Value value) {
  for (auto& [k, v] : items)
    if (k == key) {
      v = std::move(value);
      return;
    }
  items.emplace_back(key, std::move(value));
}

const Value* CallArgs::get(size_t i, const char* name) const {
  if (name)
    for (const auto& [k, v] : named)
      if (k == name) return &v;
  return i < positional.size() ? &positional[i] : nullptr;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::array(Array items) {
  Value v;
  v.kind_ = Kind::kArray;
  v.arr_ = std::make_shared<Array>(std::move(items));
  return v;
}

Value Value::object(Object o) {
  Value v;
  v.kind_ = Kind::kObject;
  v.obj_ = std::make_shared<Object>(std::move(o));
  return v;
}

Value Value::function(Function f) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.fn_ = std::make_shared<Function>(std::move(f));
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool:
    case Kind::kInt: return int_ != 0;
    case Kind::kFloat: return float_ != 0;
    case Kind::kString: return !str_->empty();
    case Kind::kArray: return !arr_->empty();
    case Kind::kObject: return !obj_->items.empty();
    case Kind::kFunction: return true;
  }
  return false;
}

const char* Value::type_name() const {
  static const char* names[] = {"undefined", "none", "bool", "int", "float", "string", "list", "dict", "function"};
  return names[int(kind_)];
}

namespace {

// A list or dict may contain itself (`x.append(x)`): walks over values stop at this depth.
constexpr int kMaxValueDepth = 256;

void check_value_depth(int depth) {
  if (depth > kMaxValueDepth)
    throw Error("a value nests deeper than " + std::to_string(kMaxValueDepth) +
                " levels (a list or dict that contains itself?)");
}

std::string float_text(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // Python prints 1.0, not 1
  return s;
}

std::string quote_python(const std::string& s) {
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + q;
}

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

void json_value(const Value& v, int indent, int depth, std::string& out) {
  check_value_depth(depth);
  check_string_size(out.size(), "tojson");
  const bool pretty = indent >= 0;
  auto newline = [&](int d) {
    if (!pretty) return;
    out += '\n';
    out.append(size_t(indent * d), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kFunction: throw Error("tojson: cannot serialise a " + std::string(v.type_name()));
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: {
      const double d = v.as_float();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_text(d);
      return;
    }
    case Value::Kind::kString: json_string(v.as_string(), out); return;
    case Value::Kind::kArray: {
      const Array& a = v.as_array();
      if (a.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += pretty ? "," : ", ";
        newline(depth + 1);
        json_value(a[i], indent, depth + 1, out);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::kObject: {
      const auto& items = v.as_object().items;
      if (items.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += pretty ? "," : ", ";
        newline(depth + 1);
        json_string(items[i].first, out);
        out += ": ";
        json_value(items[i].second, indent, depth + 1, out);
      }
      newline(depth);
      out += '}';
      return;
    }
  }
}

}  // namespace

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: return *str_;
    default: return repr();
  }
}

std::string Value::repr(int depth) const {
  check_value_depth(depth);
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return int_ ? "True" : "False";
    case Kind::kInt: return std::to_string(int_);
    case Kind::kFloat: return float_text(float_);
    case Kind::kString: return quote_python(*str_);
    case Kind::kFunction: return "<function>";
    case Kind::kArray: {
      std::string s = "[";
      for (size_t i = 0; i < arr_->size(); ++i) {
        s += (i ? ", " : "") + (*arr_)[i].repr(depth + 1);
        check_string_size(s.size(), "printing a list");
      }
      return s + "]";
    }
    case Kind::kObject: {
      std::string s = "{";
      for (size_t i = 0; i < obj_->items.size(); ++i) {
        s += (i ? ", " : "") + quote_python(obj_->items[i].first) + ": " + obj_->items[i].second.repr(depth + 1);
        check_string_size(s.size(), "printing a dict");
      }
      return s + "}";
    }
  }
  return "";
}

bool equal(const Value& a, const Value& b, int depth) {
  check_value_depth(depth);
  if (a.is_number() && b.is_number()) return a.as_float() == b.as_float();
  if ((a.kind() == Value::Kind::kBool || b.kind() == Value::Kind::kBool) && a.kind() != b.kind()) {
    if (a.is_number() || b.is_number()) return a.as_float() == b.as_float();
    return false;
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kBool: return a.as_bool() == b.as_bool();
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kArray: {
      const Array &x = a.as_array(), &y = b.as_array();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal(x[i], y[i], depth + 1)) return false;
      return true;
    }
    case Value::Kind::kObject: {
      const auto &x = a.as_object(), &y = b.as_object();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.find(k);
        if (!other || !equal(v, *other, depth + 1)) return false;
      }
      return true;
    }
    default: return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_float() < b.as_float() ? -1 : a.as_float() > b.as_float() ? 1 : 0;
  if (a.is_string() && b.is_string())
    return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() == b.as_string() ? 0 : 1;
  throw Error(std::string("cannot compare ") + a.type_name() + " with " + b.type_name());
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      for (const auto& e : j) a.push_back(from_json(e));
      return Value::array(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      for (const auto& [k, v] : j.items()) o.items.emplace_back(k, from_json(v));
      return Value::object(std::move(o));
    }
    default: return Value();
  }
}

std::string to_json(const Value& v, int indent) {
  std::string out;
  json_value(v, indent, 0, out);
  return out;
}

}  // namespace autoglm::jinja
