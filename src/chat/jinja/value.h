// Values of the Jinja subset used by chat templates: Python-like data (None, bool,
// int, float, str, list, dict in insertion order) plus callables (filters, macros).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/error.h"

namespace autoglm::jinja {

class Value;
using Array = std::vector<Value>;

struct Object {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
  // The i-th positional argument or the one called `name`; nullptr if absent.
  const Value* get(size_t i, const char* name) const;
};

using Function = std::function<Value(const CallArgs&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };

  Value() = default;  // undefined
  Value(bool b) : kind_(Kind::kBool), int_(b) {}
  Value(int v) : kind_(Kind::kInt), int_(v) {}
  Value(int64_t v) : kind_(Kind::kInt), int_(v) {}
  Value(double v) : kind_(Kind::kFloat), float_(v) {}
  Value(std::string s) : kind_(Kind::kString), str_(std::make_shared<std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  static Value none();
  static Value array(Array items = {});
  static Value object(Object o = {});
  static Value function(Function f);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool as_bool() const { return int_ != 0; }
  // A float converts saturating (NaN as 0): templates cannot reach an undefined conversion.
  int64_t as_int() const { return kind_ == Kind::kFloat ? saturated_int(float_) : int_; }
  static int64_t saturated_int(double d) {
    if (!(d == d)) return 0;
    if (d >= 9223372036854775807.0) return INT64_MAX;
    if (d <= -9223372036854775808.0) return INT64_MIN;
    return int64_t(d);
  }
  double as_float() const { return kind_ == Kind::kFloat ? float_ : double(int_); }
  const std::string& as_string() const { return *str_; }
  Array& as_array() const { return *arr_; }
  Object& as_object() const { return *obj_; }
  const Function& as_function() const { return *fn_; }

  bool truthy() const;
  std::string str() const;                // Python str()
  std::string repr(int depth = 0) const;  // Python repr(), used inside printed containers
  const char* type_name() const;

 private:
  Kind kind_ = Kind::kUndefined;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<std::string> str_;
  std::shared_ptr<Array> arr_;
  std::shared_ptr<Object> obj_;
  std::shared_ptr<Function> fn_;
};

bool equal(const Value& a, const Value& b, int depth = 0);
// -1, 0, 1; throws for values that do not order.
int compare(const Value& a, const Value& b);

Value from_json(const nlohmann::ordered_json& j);
// json.dumps(ensure_ascii=False) with Python's separators; indent < 0: one line.
std::string to_json(const Value& v, int indent = -1);

}  // namespace autoglm::jinja
