#include "sample/json_schema.h"

#include <map>
#include <set>
#include <vector>

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
      {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ))"},
      {"time",
       R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,3} )? ( "Z" | [-+] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
      {"date-time", R"({p}date "T" {p}time)"},
      {"uuid", R"([0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12})"},
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
      {"date-time", {"date", "time"}},
  };
  return d;
}

}  // namespace

std::string gbnf_literal(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

namespace {

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

  std::string new_rule(const std::string& hint, const std::string& body) {
    std::string name;
    for (char c : hint) name += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    name = prefix_ + "s-" + name + "-" + std::to_string(counter_++);
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
    for (const char* unsupported : {"allOf", "not", "pattern", "patternProperties", "maximum", "exclusiveMaximum",
                                    "exclusiveMinimum", "multipleOf", "uniqueItems", "contains", "if", "prefixItems",
                                    "minProperties", "maxProperties", "dependentRequired"})
      if (s.contains(unsupported)) return refuse(path, std::string("'") + unsupported + "' is not supported");
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

  // A reference is one more level: a chain of $refs counts toward the depth limit like nesting.
  Result<std::string> visit_ref(const json& ref, const std::string& path, int depth) {
    if (!ref.is_string() || ref.get<std::string>().rfind("#", 0) != 0)
      return refuse(path, "only local $ref (\"#/...\") is supported");
    const std::string target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    json::json_pointer pointer;
    try {
      pointer = json::json_pointer(target.substr(1));
    } catch (const json::exception&) {
      return refuse(path, "$ref '" + target + "' is not a JSON pointer");
    }
    if (!root_.contains(pointer)) return refuse(path, "$ref '" + target + "' points to nothing");
    const std::string name = new_rule("ref" + target.substr(1), "");
    refs_[target] = name;  // before visiting: recursive schemas refer to the rule by name
    AUTOGLM_ASSIGN_OR_RETURN(rules_[name], visit(root_.at(pointer), target, depth + 1));
    return name;
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
      else if (s.contains("items"))
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

  Result<std::string> visit_object(const json& s, const std::string& path, int depth) {
    const json props = s.value("properties", json::object());
    if (!props.is_object()) return refuse(path, "'properties' must be an object");
    const json extra = s.value("additionalProperties", json());
    if (props.empty() && (extra.is_null() || extra == true)) return use("object");
    std::set<std::string> required;
    for (const json& r : s.value("required", json::array())) {
      if (!r.is_string()) return refuse(path, "'required' must list property names");
      if (!props.contains(r.get<std::string>()))
        return refuse(path, "required property '" + r.get<std::string>() + "' is not among the properties");
      required.insert(r.get<std::string>());
    }
    std::vector<std::string> req, opt;
    for (const auto& [key, sub] : props.items()) {
      AUTOGLM_ASSIGN_OR_RETURN(const std::string value, visit(sub, path + "/properties/" + key, depth + 1));
      const std::string kv = gbnf_literal(json(key).dump()) + " \":\" " + use("ws") + " " + value;
      (required.count(key) ? req : opt).push_back(new_rule(path + "-" + key, kv));
    }
    if (props.empty() && extra.is_object()) {  // a map: any keys, values of one schema
      AUTOGLM_ASSIGN_OR_RETURN(const std::string value, visit(extra, path + "/additionalProperties", depth + 1));
      const std::string kv = new_rule(path + "-entry", use("string") + " \":\" " + use("ws") + " " + value);
      return "\"{\" " + use("ws") + " ( " + kv + " ( \",\" " + use("ws") + " " + kv + " )* )? \"}\"";
    }
    const std::string sep = "\",\" " + use("ws") + " ";
    std::string body;
    if (!req.empty()) {
      body = req[0];
      for (size_t i = 1; i < req.size(); ++i) body += " " + sep + req[i];
      for (const std::string& o : opt) body += " ( " + sep + o + " )?";
    } else if (!opt.empty()) {
      // The first property written has no comma before it: first_i ::= o_i rest_{i+1} | first_{i+1}.
      std::string first;
      for (size_t i = opt.size(); i-- > 0;) {
        std::string rest;
        for (size_t j = i + 1; j < opt.size(); ++j) rest += " ( " + sep + opt[j] + " )?";
        const std::string here = opt[i] + rest;
        first = first.empty() ? new_rule(path + "-first", here) : new_rule(path + "-first", here + " | " + first);
      }
      body = "( " + first + " )?";
    }
    return "\"{\" " + use("ws") + " " + body + " \"}\"";
  }

  Result<std::string> visit_array(const json& s, const std::string& path, int depth) {
    std::string item = use("value");
    if (s.contains("items")) {
      AUTOGLM_ASSIGN_OR_RETURN(item, visit(s["items"], path + "/items", depth + 1));
      item = new_rule(path + "-item", item);
    }
    const int64_t lo = s.value("minItems", int64_t(0));
    const int64_t hi = s.contains("maxItems") ? s["maxItems"].get<int64_t>() : -1;
    if (lo < 0 || (hi >= 0 && hi < lo) || lo > 1000 || hi > 1000)
      return refuse(path, "minItems/maxItems must satisfy 0 <= minItems <= maxItems <= 1000");
    const std::string open = "\"[\" " + use("ws") + " ", close = " \"]\"";
    if (hi == 0) return open + close.substr(1);
    const std::string more = "( \",\" " + use("ws") + " " + item + " )";
    const std::string tail_lo = std::to_string(lo > 0 ? lo - 1 : 0);
    const std::string tail =
        hi < 0 ? more + "{" + tail_lo + ",}" : more + "{" + tail_lo + "," + std::to_string(hi - 1) + "}";
    const std::string list = item + " " + tail;
    return open + (lo > 0 ? list : "( " + list + " )?") + close;
  }

  Result<std::string> visit_string(const json& s, const std::string& path) {
    if (s.contains("format")) {
      const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
      if (f == "date" || f == "time" || f == "date-time" || f == "uuid") return "\"\\\"\" " + use(f) + " \"\\\"\"";
      return refuse(path, "string format '" + f + "' is not supported (date, time, date-time, uuid)");
    }
    const int64_t lo = s.value("minLength", int64_t(0));
    const int64_t hi = s.contains("maxLength") ? s["maxLength"].get<int64_t>() : -1;
    if (lo == 0 && hi < 0) return use("string");
    if (lo < 0 || (hi >= 0 && hi < lo) || lo > 10000 || hi > 10000)
      return refuse(path, "minLength/maxLength must satisfy 0 <= minLength <= maxLength <= 10000");
    return "\"\\\"\" " + use("char") + "{" + std::to_string(lo) + "," + (hi >= 0 ? std::to_string(hi) : "") +
           "} \"\\\"\"";
  }

  Result<std::string> visit_number(const json& s, const std::string& path, bool integer) {
    if (!s.contains("minimum")) return use(integer ? "integer" : "number");
    const json& m = s["minimum"];
    if (m == 0) {
      const std::string int_part = use("int-part");
      return integer ? int_part : int_part + R"( ( "." [0-9]{1,15} )?)";
    }
    if (integer && m == 1) return std::string("[1-9] [0-9]{0,15}");
    return refuse(path, "'minimum' other than 0 (or 1 for integers) is not supported");
  }

  const json& root_;
  std::string prefix_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> refs_;
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
