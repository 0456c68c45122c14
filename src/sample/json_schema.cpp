#include "sample/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "sample/automaton_gbnf.h"
#include "sample/regex.h"
#include "sample/schema_formats.h"
#include "sample/schema_numbers.h"

namespace autoglm {
namespace {

using nlohmann::json;

// The JSON building blocks, added to a grammar on first use.
const std::map<std::string, std::string>& primitives() {
  static const std::map<std::string, std::string> p = {
      {"ws", R"(" "?)"},
      {"char", R"([^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))"},
      {"string", R"("\"" {p}char* "\"")"},
      {"int-part", R"("0" | [1-9] [0-9]{0,15})"},
      // At most 16 integer digits and a two-digit exponent: every sentence is a finite double
      // (a three-digit exponent let 1e999, which parses to Infinity, through).
      {"number", R"("-"? {p}int-part ( "." [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,2} )?)"},
      {"integer", R"("-"? {p}int-part)"},
      {"boolean", R"("true" | "false")"},
      {"null", R"("null")"},
      {"value", R"({p}object | {p}array | {p}string | {p}number | {p}boolean | {p}null)"},
      {"object", R"("{" {p}ws ( {p}string ":" {p}ws {p}value ( "," {p}ws {p}string ":" {p}ws {p}value )* )? "}")"},
      {"array", R"("[" {p}ws ( {p}value ( "," {p}ws {p}value )* )? "]")"},
  };
  return p;
}

// Rules a primitive refers to.
const std::map<std::string, std::vector<std::string>>& primitive_deps() {
  static const std::map<std::string, std::vector<std::string>> d = {
      {"string", {"char"}},
      {"number", {"int-part"}},
      {"integer", {"int-part"}},
      {"value", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", {"ws", "string", "value"}},
      {"array", {"ws", "value"}},
  };
  return d;
}

// Keywords that change which values are valid and that no grammar here enforces.
constexpr const char* kRefused[] = {"not",
                                    "patternProperties",
                                    "uniqueItems",
                                    "contains",
                                    "minContains",
                                    "maxContains",
                                    "if",
                                    "then",
                                    "else",
                                    "dependentRequired",
                                    "dependentSchemas",
                                    "dependencies",
                                    "propertyNames",
                                    "unevaluatedProperties",
                                    "unevaluatedItems",
                                    "$dynamicRef",
                                    "$recursiveRef"};

class Converter {
 public:
  Converter(const json& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {}

  Result<std::string> run() {
    AUTOGLM_ASSIGN_OR_RETURN(const std::string expr, visit(root_, "#", 0));
    std::string out = prefix_ + "root ::= " + expr + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  Status refuse(const std::string& path, const std::string& what) const {
    return invalid_argument("schema at " + path + ": " + what);
  }

  std::string use(const std::string& primitive) {
    const std::string name = prefix_ + primitive;
    if (rules_.count(name)) return name;
    std::string body = primitives().at(primitive);
    for (size_t at; (at = body.find("{p}")) != std::string::npos;) body.replace(at, 3, prefix_);
    rules_[name] = body;
    if (auto it = primitive_deps().find(primitive); it != primitive_deps().end())
      for (const std::string& dep : it->second) use(dep);
    return name;
  }

  std::string rule_name(const std::string& hint) {
    std::string name;
    for (char c : hint) name += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    return prefix_ + "s-" + name + "-" + std::to_string(counter_++);
  }

  std::string new_rule(const std::string& hint, const std::string& body) {
    const std::string name = rule_name(hint);
    rules_[name] = body;
    return name;
  }

  Result<std::string> visit(const json& s, const std::string& path, int depth) {
    if (depth > 64) return refuse(path, "nested too deeply");
    if (s.is_boolean()) {
      if (!s.get<bool>()) return refuse(path, "the schema 'false' admits no value");
      return use("value");
    }
    if (!s.is_object()) return refuse(path, "a schema must be an object or a boolean");
    for (const char* refused : kRefused)
      if (s.contains(refused)) return refuse(path, std::string("'") + refused + "' is not supported");
    if (s.contains("allOf")) {
      AUTOGLM_ASSIGN_OR_RETURN(const json merged, merge_all_of(s, path + "/allOf", depth));
      return visit(merged, path, depth + 1);
    }
    if (s.contains("$ref")) return visit_ref(s["$ref"], path, depth);
    if (s.contains("const")) return gbnf_literal(s["const"].dump());
    if (s.contains("enum")) return visit_enum(s["enum"], path);
    for (const char* key : {"anyOf", "oneOf"})
      if (s.contains(key)) return visit_alternatives(s[key], path + "/" + key, depth);
    AUTOGLM_ASSIGN_OR_RETURN(std::string expr, visit_type(s, path, depth));
    if (s.contains("nullable") && !s["nullable"].is_boolean()) return refuse(path, "'nullable' must be a boolean");
    if (s.value("nullable", false)) expr = "( " + expr + " | " + use("null") + " )";
    return expr;
  }

  Result<const json*> resolve(const json& ref, const std::string& path) const {
    if (!ref.is_string() || ref.get<std::string>().rfind("#", 0) != 0)
      return refuse(path, "only local $ref (\"#/...\") is supported");
    const std::string target = ref.get<std::string>();
    json::json_pointer pointer;
    try {
      pointer = json::json_pointer(target.substr(1));
    } catch (const json::exception&) {
      return refuse(path, "$ref '" + target + "' is not a JSON pointer");
    }
    if (!root_.contains(pointer)) return refuse(path, "$ref '" + target + "' points to nothing");
    return &root_.at(pointer);
  }

  // A reference is one more level: a chain of $refs counts toward the depth limit like nesting.
  Result<std::string> visit_ref(const json& ref, const std::string& path, int depth) {
    AUTOGLM_ASSIGN_OR_RETURN(const json* target, resolve(ref, path));
    const std::string key = ref.get<std::string>();
    if (auto it = refs_.find(key); it != refs_.end()) return it->second;
    const std::string name = new_rule("ref" + key.substr(1), "");
    refs_[key] = name;  // before visiting: recursive schemas refer to the rule by name
    AUTOGLM_ASSIGN_OR_RETURN(rules_[name], visit(*target, key, depth + 1));
    return name;
  }

  // allOf as one schema: properties and required combine, additionalProperties takes the
  // strictest, any other keyword must agree between the branches that name it.
  Result<json> merge_all_of(const json& s, const std::string& path, int depth) {
    if (depth > 64) return refuse(path, "nested too deeply");
    const json& list = s["allOf"];
    if (!list.is_array() || list.empty()) return refuse(path, "must be a non-empty array of schemas");
    json merged = s;
    merged.erase("allOf");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = path + "/" + std::to_string(i);
      json branch = list[i];
      while (branch.is_object() && branch.contains("$ref")) {
        AUTOGLM_ASSIGN_OR_RETURN(const json* target, resolve(branch["$ref"], at));
        json rest = branch;
        rest.erase("$ref");
        branch = *target;
        for (const auto& [k, v] : rest.items()) branch[k] = v;
        if (++depth > 64) return refuse(at, "nested too deeply");
      }
      if (branch.is_object() && branch.contains("allOf")) {
        AUTOGLM_ASSIGN_OR_RETURN(branch, merge_all_of(branch, at + "/allOf", depth + 1));
      }
      if (!branch.is_object()) return refuse(at, "allOf branches must be schema objects");
      AUTOGLM_RETURN_IF_ERROR(merge_into(merged, branch, at));
    }
    return merged;
  }

  Status merge_into(json& merged, const json& branch, const std::string& path) const {
    for (const auto& [key, value] : branch.items()) {
      if (key == "properties") {
        for (const auto& [name, sub] : value.items()) {
          json& slot = merged["properties"][name];
          if (!slot.is_null() && slot != sub)
            return refuse(path, "allOf branches define property '" + name + "' differently");
          slot = sub;
        }
      } else if (key == "required") {
        json& all = merged["required"];
        if (all.is_null()) all = json::array();
        for (const json& r : value)
          if (std::find(all.begin(), all.end(), r) == all.end()) all.push_back(r);
      } else if (key == "additionalProperties") {
        if (!merged.contains(key) || value == false) merged[key] = value;
      } else if (is_annotation(key)) {
        continue;
      } else if (merged.contains(key) && merged[key] != value) {
        return refuse(path, "allOf branches disagree on '" + key + "'");
      } else {
        merged[key] = value;
      }
    }
    return Status::ok();
  }

  static bool is_annotation(const std::string& key) {
    return key == "title" || key == "description" || key == "default" || key == "examples" || key == "$schema" ||
           key == "$id" || key == "$comment" || key == "deprecated" || key == "readOnly" || key == "writeOnly";
  }

  Result<std::string> visit_enum(const json& values, const std::string& path) {
    if (!values.is_array() || values.empty()) return refuse(path, "'enum' must be a non-empty array");
    std::string expr = "(";
    for (size_t i = 0; i < values.size(); ++i) expr += (i ? " | " : " ") + gbnf_literal(values[i].dump());
    return expr + " )";
  }

  Result<std::string> visit_alternatives(const json& list, const std::string& path, int depth) {
    if (!list.is_array() || list.empty()) return refuse(path, "must be a non-empty array of schemas");
    std::string expr = "(";
    for (size_t i = 0; i < list.size(); ++i) {
      AUTOGLM_ASSIGN_OR_RETURN(const std::string branch, visit(list[i], path + "/" + std::to_string(i), depth + 1));
      expr += (i ? " | " : " ") + branch;
    }
    return expr + " )";
  }

  Result<std::string> visit_type(const json& s, const std::string& path, int depth) {
    json type = s.value("type", json());
    if (type.is_null()) {
      if (s.contains("properties"))
        type = "object";
      else if (s.contains("items") || s.contains("prefixItems"))
        type = "array";
      else
        return use("value");
    }
    if (type.is_array()) {
      std::string expr = "(";
      for (size_t i = 0; i < type.size(); ++i) {
        json one = s;
        one["type"] = type[i];
        AUTOGLM_ASSIGN_OR_RETURN(const std::string branch, visit_type(one, path, depth));
        expr += (i ? " | " : " ") + branch;
      }
      return expr + " )";
    }
    if (!type.is_string()) return refuse(path, "'type' must be a string or a list of strings");
    const std::string t = type.get<std::string>();
    if (t == "object") return visit_object(s, path, depth);
    if (t == "array") return visit_array(s, path, depth);
    if (t == "string") return visit_string(s, path);
    if (t == "number" || t == "integer") return visit_number(s, path, t == "integer");
    if (t == "boolean") return use("boolean");
    if (t == "null") return use("null");
    return refuse(path, "unknown type '" + t + "'");
  }

  // Bounds on a count (items, properties) as given by two keywords.
  struct Count {
    int64_t lo = 0, hi = -1;  // hi -1: unbounded
  };
  // A count keyword's value (`absent` when missing): an integer, possibly written as 5.0.
  Result<int64_t> count_keyword(const json& s, const char* key, int64_t absent, const std::string& path) const {
    if (!s.contains(key)) return absent;
    const json& v = s[key];
    if (v.is_number_unsigned()) return int64_t(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX));
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())  // huge ones fail the bounds
      return int64_t(std::clamp(v.get<double>(), -1e18, 1e18));
    return refuse(path, std::string("'") + key + "' must be an integer");
  }

  // `ceiling` bounds what one schema may ask for (the grammar grows with it).
  Result<Count> count_of(const json& s, const char* min_key, const char* max_key, int64_t ceiling,
                         const std::string& path) const {
    AUTOGLM_ASSIGN_OR_RETURN(const int64_t lo, count_keyword(s, min_key, 0, path));
    AUTOGLM_ASSIGN_OR_RETURN(const int64_t hi, count_keyword(s, max_key, -1, path));
    const Count c{lo, hi};
    if (c.lo < 0 || (c.hi >= 0 && c.hi < c.lo) || c.lo > ceiling || c.hi > ceiling)
      return refuse(path, std::string(min_key) + "/" + max_key + " must satisfy 0 <= " + min_key + " <= " + max_key +
                              " <= " + std::to_string(ceiling));
    return c;
  }

  // `open item ("," item)* close` with the item count in [count.lo, count.hi].
  std::string separated(const std::string& open, const std::string& item, Count count, const std::string& close) {
    const std::string start = open + " " + use("ws") + " ";
    if (count.hi == 0) return start + close;
    const std::string more = "( \",\" " + use("ws") + " " + item + " )";
    const std::string tail_lo = std::to_string(count.lo > 0 ? count.lo - 1 : 0);
    const std::string tail = more + "{" + tail_lo + "," + (count.hi < 0 ? "" : std::to_string(count.hi - 1)) + "}";
    const std::string list = item + " " + tail;
    return start + (count.lo > 0 ? list : "( " + list + " )?") + " " + close;
  }

  Result<std::string> visit_object(const json& s, const std::string& path, int depth) {
    const json props = s.value("properties", json::object());
    if (!props.is_object()) return refuse(path, "'properties' must be an object");
    const json extra = s.value("additionalProperties", json());
    AUTOGLM_ASSIGN_OR_RETURN(const Count count, count_of(s, "minProperties", "maxProperties", 1000, path));
    std::set<std::string> required;
    for (const json& r : s.value("required", json::array())) {
      if (!r.is_string()) return refuse(path, "'required' must list property names");
      if (!props.contains(r.get<std::string>()))
        return refuse(path, "required property '" + r.get<std::string>() + "' is not among the properties");
      required.insert(r.get<std::string>());
    }
    if (props.empty()) return visit_map(extra, count, path, depth);
    std::vector<Property> list;  // the required ones first, then the rest, each in key order
    for (const bool want_required : {true, false})
      for (const auto& [key, sub] : props.items()) {
        if ((required.count(key) > 0) != want_required) continue;
        AUTOGLM_ASSIGN_OR_RETURN(const std::string value, visit(sub, path + "/properties/" + key, depth + 1));
        const std::string kv = gbnf_literal(json(key).dump()) + " \":\" " + use("ws") + " " + value;
        list.push_back({new_rule(path + "-" + key, kv), want_required});
      }
    PropertyChain chain{list, count, count.hi >= 0 ? count.hi : std::max<int64_t>(count.lo, 1), {}, path};
    const std::string body = property_chain(chain, 0, 0);
    if (body.empty()) return refuse(path, "minProperties/maxProperties cannot be met by the listed properties");
    return "\"{\" " + use("ws") + " " + body + " \"}\"";
  }

  // Objects without listed properties: any keys, values of `extra` (a schema, or any value).
  Result<std::string> visit_map(const json& extra, Count count, const std::string& path, int depth) {
    if (extra == false) count.hi = 0;
    if (count.hi >= 0 && count.hi < count.lo) return refuse(path, "minProperties cannot be met");
    std::string value = use("value");
    if (extra.is_object()) {
      AUTOGLM_ASSIGN_OR_RETURN(value, visit(extra, path + "/additionalProperties", depth + 1));
    } else if (count.lo == 0 && count.hi < 0) {
      return use("object");
    }
    const std::string kv = new_rule(path + "-entry", use("string") + " \":\" " + use("ws") + " " + value);
    return separated("\"{\"", kv, count, "\"}\"");
  }

  struct Property {
    std::string rule;
    bool required;
  };
  struct PropertyChain {
    const std::vector<Property>& props;
    Count count;
    int64_t cap;                                             // counts above it behave alike
    std::map<std::pair<size_t, int64_t>, std::string> memo;  // "" when nothing can follow
    std::string path;
  };

  // The properties from index i on, `written` of them already out (a comma precedes the
  // next one iff written > 0). Returns the rule, or "" when the counts cannot be met.
  std::string property_chain(PropertyChain& chain, size_t i, int64_t written) {
    if (auto it = chain.memo.find({i, written}); it != chain.memo.end()) return it->second;
    std::string body;
    if (i == chain.props.size()) {
      body = written >= chain.count.lo ? "\"\"" : "";
    } else {
      const Property& p = chain.props[i];
      if (chain.count.hi < 0 || written + 1 <= chain.count.hi) {
        const std::string next = property_chain(chain, i + 1, std::min(written + 1, chain.cap));
        if (!next.empty()) body = (written > 0 ? "\",\" " + use("ws") + " " : "") + p.rule + " " + next;
      }
      if (!p.required) {
        const std::string skip = property_chain(chain, i + 1, written);
        if (!skip.empty()) body += (body.empty() ? "" : " | ") + skip;
      }
    }
    const std::string name = body.empty() ? "" : new_rule(chain.path + "-props", body);
    chain.memo[{i, written}] = name;
    return name;
  }

  Result<std::string> visit_array(const json& s, const std::string& path, int depth) {
    AUTOGLM_ASSIGN_OR_RETURN(Count count, count_of(s, "minItems", "maxItems", 1000, path));
    std::string item = use("value");
    const json items = s.value("items", json());
    if (items.is_object() || items == true) {
      AUTOGLM_ASSIGN_OR_RETURN(item, visit(items, path + "/items", depth + 1));
      item = new_rule(path + "-item", item);
    }
    const json prefix = s.value("prefixItems", json::array());
    if (!prefix.is_array()) return refuse(path, "'prefixItems' must be an array of schemas");
    if (prefix.empty()) {
      if (items == false) count.hi = 0;
      if (count.hi >= 0 && count.hi < count.lo) return refuse(path, "minItems cannot be met");
      return separated("\"[\"", item, count, "\"]\"");
    }
    std::vector<std::string> elements;
    for (size_t i = 0; i < prefix.size(); ++i) {
      AUTOGLM_ASSIGN_OR_RETURN(const std::string e,
                               visit(prefix[i], path + "/prefixItems/" + std::to_string(i), depth + 1));
      elements.push_back(new_rule(path + "-tuple", e));
    }
    if (items == false) count.hi = count.hi < 0 ? int64_t(prefix.size()) : std::min<int64_t>(count.hi, prefix.size());
    if (count.hi >= 0 && count.hi < count.lo) return refuse(path, "minItems cannot be met with 'items': false");
    const std::string sep = "\",\" " + use("ws") + " ";
    // After the whole tuple: the rest, each item after a comma.
    const auto p = int64_t(prefix.size());
    std::string tail = "\"\"";
    if (count.hi < 0 || count.hi > p) {
      const int64_t lo = std::max<int64_t>(count.lo - p, 0);
      tail = "( " + sep + item + " ){" + std::to_string(lo) + "," + (count.hi < 0 ? "" : std::to_string(count.hi - p)) +
             "}";
    }
    std::string next = new_rule(path + "-rest", tail);
    for (int64_t i = p - 1; i >= 0; --i) {
      std::string body = (i > 0 ? sep : "") + elements[size_t(i)] + " " + next;
      if (i >= count.lo) body += " | \"\"";
      next = new_rule(path + "-tuple-from", body);
    }
    return "\"[\" " + use("ws") + " " + next + " \"]\"";
  }

  Result<std::string> visit_string(const json& s, const std::string& path) {
    AUTOGLM_ASSIGN_OR_RETURN(const Count length, count_of(s, "minLength", "maxLength", 10000, path));
    const bool has_format = s.contains("format"), has_pattern = s.contains("pattern");
    if (!has_format && !has_pattern) {
      if (length.lo == 0 && length.hi < 0) return use("string");
      return "\"\\\"\" " + use("char") + "{" + std::to_string(length.lo) + "," +
             (length.hi >= 0 ? std::to_string(length.hi) : "") + "} \"\\\"\"";
    }
    std::vector<std::pair<std::string, std::string>> regexes;  // (what, regex)
    if (has_format) {
      const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
      const char* regex = format_regex(f);
      if (!regex) return refuse(path, "string format '" + f + "' is not supported");
      regexes.push_back({"format '" + f + "'", regex});
    }
    if (has_pattern) {
      if (!s["pattern"].is_string()) return refuse(path, "'pattern' must be a string");
      regexes.push_back({"'pattern'", s["pattern"].get<std::string>()});
    }
    if (length.lo > 0 || length.hi >= 0)
      regexes.push_back({"minLength/maxLength", "^[^]{" + std::to_string(length.lo) + "," +
                                                    (length.hi >= 0 ? std::to_string(length.hi) : "") + "}$"});
    const std::string key = json(regexes).dump();
    if (auto it = strings_.find(key); it != strings_.end()) return it->second;
    AUTOGLM_ASSIGN_OR_RETURN(const Dfa dfa, intersect_regexes(regexes, path));
    const std::string start = add_dfa_rules(dfa, rule_name(path + "-text"), TextForm::kJsonString, rules_);
    return strings_[key] = "\"\\\"\" " + start + " \"\\\"\"";
  }

  Result<Dfa> intersect_regexes(const std::vector<std::pair<std::string, std::string>>& regexes,
                                const std::string& path) {
    Dfa all;
    for (size_t i = 0; i < regexes.size(); ++i) {
      auto one = compile_regex(regexes[i].second, automata_);
      if (!one) return refuse(path, regexes[i].first + ": " + one.status().message());
      if (i == 0) {
        all = std::move(*one);
        continue;
      }
      auto both = combine(all, *one, Combine::kBoth, automata_, regexes[i].first);
      if (!both) return refuse(path, both.status().message());
      all = std::move(*both);
    }
    if (all.states.empty()) return refuse(path, "no string satisfies " + regexes.back().first + " with the rest");
    return all;
  }

  Result<std::string> visit_number(const json& s, const std::string& path, bool integer) {
    NumberBounds bounds;
    AUTOGLM_RETURN_IF_ERROR(read_bound(s, "minimum", "exclusiveMinimum", true, bounds, path));
    AUTOGLM_RETURN_IF_ERROR(read_bound(s, "maximum", "exclusiveMaximum", false, bounds, path));
    int64_t divisor = 0;
    if (s.contains("multipleOf")) {
      const json& m = s["multipleOf"];
      if (!m.is_number() || m.get<double>() <= 0) return refuse(path, "'multipleOf' must be a number above 0");
      const double d = m.get<double>();
      // Its automaton has a state per remainder, built before the combined one is measured:
      // a divisor over the states limit would be refused only after hundreds of MB.
      const double most = double(automata_.limits().max_dfa_states);
      if (std::floor(d) != d || d > most)
        return refuse(path, "'multipleOf' " + m.dump() + " is not supported (whole numbers up to " +
                                std::to_string(int64_t(most)) + ")");
      divisor = int64_t(d);
      integer = true;  // a whole multipleOf admits only integers
    }
    if (!bounds.bounded() && divisor <= 1) return use(integer ? "integer" : "number");
    auto regex = number_regex(bounds, integer);
    if (!regex) return refuse(path, regex.status().message());
    const std::string what = "'multipleOf' " + std::to_string(divisor);
    auto dfa = compile_regex(*regex, automata_);
    if (dfa && divisor > 1) dfa = combine(*dfa, multiple_of_dfa(divisor), Combine::kBoth, automata_, what);
    if (!dfa) return refuse(path, dfa.status().message());
    if (dfa->states.empty()) return refuse(path, "no integer in range is a multiple of " + std::to_string(divisor));
    return add_dfa_rules(*dfa, rule_name(path + "-number"), TextForm::kRaw, rules_);
  }

  // `minimum` with `exclusiveMinimum` (a number in draft 6+, a flag in draft 4): the tighter wins.
  Status read_bound(const json& s, const char* inclusive, const char* exclusive, bool lower, NumberBounds& b,
                    const std::string& path) const {
    std::optional<double>& slot = lower ? b.minimum : b.maximum;
    bool& excl = lower ? b.exclusive_minimum : b.exclusive_maximum;
    auto tighter = [&](double v, bool is_excl) {
      if (!slot || (lower ? v > *slot : v < *slot) || (v == *slot && is_excl)) slot = v, excl = is_excl;
    };
    if (s.contains(inclusive)) {
      if (!s[inclusive].is_number()) return refuse(path, std::string("'") + inclusive + "' must be a number");
      tighter(s[inclusive].get<double>(), s.value(exclusive, json()) == true);
    }
    if (s.contains(exclusive) && !s[exclusive].is_boolean()) {
      if (!s[exclusive].is_number()) return refuse(path, std::string("'") + exclusive + "' must be a number");
      tighter(s[exclusive].get<double>(), true);
    }
    return Status::ok();
  }

  const json& root_;
  std::string prefix_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> refs_;
  std::map<std::string, std::string> strings_;  // the same string constraints share rules
  // One work budget for all of the schema's automata: a schema of many patterns that each
  // fit must not add up to seconds of a request-preparation thread.
  AutomatonBudget automata_;
  int counter_ = 0;
};

}  // namespace

Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema, const std::string& rule_prefix) {
  try {
    return Converter(schema, rule_prefix).run();
  } catch (const json::exception& e) {  // a keyword with a value of the wrong type
    return invalid_argument(std::string("schema: a keyword has a value of the wrong type (") + e.what() + ")");
  }
}

std::string json_object_gbnf() {
  auto converted = json_schema_to_gbnf(json{{"type", "object"}});
  return *converted;
}

}  // namespace autoglm
