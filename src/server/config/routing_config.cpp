#include "server/config/routing_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>

namespace autoglm {
namespace {

std::string lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string shown(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

Status read_map(const ConfigReader& r, const YAML::Node& node, const std::string& at, const char* known) {
  if (!node.IsMap()) return r.error(node, at, std::string("must be a mapping (") + known + ")");
  return Status::ok();
}

// if: {prompt_tokens_above, prompt_tokens_below, last_user_matches, tools, response_format,
//      header: {name, value}, api_key}
Status read_condition(const ConfigReader& r, const YAML::Node& node, const std::string& at, RuleCondition& c) {
  constexpr const char* kKeys =
      "prompt_tokens_above, prompt_tokens_below, last_user_matches, tools, response_format, header, api_key";
  AUTOGLM_RETURN_IF_ERROR(read_map(r, node, at, kKeys));
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar(), key_at = at + "." + key;
    if (key == "prompt_tokens_above" || key == "prompt_tokens_below") {
      int64_t n = 0;
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int64_t>(kv.second, key_at, n, 0, int64_t(1) << 30));
      (key == "prompt_tokens_above" ? c.prompt_tokens_above : c.prompt_tokens_below) = n;
    } else if (key == "last_user_matches") {
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, key_at, c.last_user_matches));
      try {
        c.last_user_regex = std::make_shared<const std::regex>(c.last_user_matches, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return r.error(kv.second, key_at, std::string("is not a valid regular expression: ") + e.what());
      }
    } else if (key == "tools" || key == "response_format") {
      bool b = false;
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, key_at, b));
      (key == "tools" ? c.tools : c.response_format) = b;
    } else if (key == "header") {
      AUTOGLM_RETURN_IF_ERROR(read_map(r, kv.second, key_at, "name, value"));
      std::string name, value;
      for (const auto& h : kv.second) {
        const std::string hk = h.first.Scalar();
        if (hk == "name") {
          AUTOGLM_RETURN_IF_ERROR(r.scalar(h.second, key_at + ".name", name));
        } else if (hk == "value") {
          AUTOGLM_RETURN_IF_ERROR(r.scalar(h.second, key_at + ".value", value));
        } else {
          return r.error(h.first, key_at + "." + hk, "is not a known key (name, value)");
        }
      }
      if (name.empty()) return r.error(kv.second, key_at + ".name", "is required");
      c.header = std::make_pair(lower(name), value);
    } else if (key == "api_key") {
      std::string k;
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, key_at, k));
      c.api_key = k;
    } else {
      return r.error(kv.first, key_at, std::string("is not a known key (") + kKeys + ")");
    }
  }
  return Status::ok();
}

// rules: [{if: {...}, model: NAME}, ...]
Status read_rules(const ConfigReader& r, const YAML::Node& node, const std::string& at, Route& route) {
  if (!node.IsSequence()) return r.error(node, at, "must be a list of {if: {...}, model: NAME}");
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string rule_at = at + "[" + std::to_string(i) + "]";
    AUTOGLM_RETURN_IF_ERROR(read_map(r, node[i], rule_at, "if, model"));
    RouteRule rule;
    bool has_if = false;
    for (const auto& kv : node[i]) {
      const std::string key = kv.first.Scalar();
      if (key == "if") {
        has_if = true;
        AUTOGLM_RETURN_IF_ERROR(read_condition(r, kv.second, rule_at + ".if", rule.when));
      } else if (key == "model") {
        AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, rule_at + ".model", rule.model));
      } else {
        return r.error(kv.first, rule_at + "." + key, "is not a known key (if, model)");
      }
    }
    if (!has_if) return r.error(node[i], rule_at + ".if", "is required (the condition)");
    if (rule.model.empty()) return r.error(node[i], rule_at + ".model", "is required");
    route.rules.push_back(std::move(rule));
  }
  return Status::ok();
}

// cascade: {light, heavy, tokens, confidence: mean | min, threshold}
Status read_cascade(const ConfigReader& r, const YAML::Node& node, const std::string& at, CascadeRoute& c) {
  constexpr const char* kKeys = "light, heavy, tokens, confidence, threshold";
  AUTOGLM_RETURN_IF_ERROR(read_map(r, node, at, kKeys));
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar(), key_at = at + "." + key;
    if (key == "light") {
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, key_at, c.light));
    } else if (key == "heavy") {
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, key_at, c.heavy));
    } else if (key == "tokens") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int32_t>(kv.second, key_at, c.tokens, 1, 256));
    } else if (key == "threshold") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<double>(kv.second, key_at, c.threshold, 0, 1));
    } else if (key == "confidence") {
      std::string m;
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, key_at, m));
      if (m != "mean" && m != "min") return r.error(kv.second, key_at, "must be mean or min");
      c.measure = m == "mean" ? ConfidenceMeasure::kMean : ConfidenceMeasure::kMin;
    } else {
      return r.error(kv.first, key_at, std::string("is not a known key (") + kKeys + ")");
    }
  }
  if (c.light.empty()) return r.error(node, at + ".light", "is required (the model that answers first)");
  if (c.heavy.empty()) return r.error(node, at + ".heavy", "is required (the model a doubtful answer goes to)");
  if (c.light == c.heavy)
    return r.error(node, at, "needs two different models (light and heavy are both '" + c.light + "')");
  return Status::ok();
}

// split: {arms: [{model, weight}, ...], sticky: user | api_key | header:NAME}
Status read_split(const ConfigReader& r, const YAML::Node& node, const std::string& at, SplitRoute& s) {
  AUTOGLM_RETURN_IF_ERROR(read_map(r, node, at, "arms, sticky"));
  std::optional<YAML::Node> arms;
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar(), key_at = at + "." + key;
    if (key == "arms") {
      arms = kv.second;
    } else if (key == "sticky") {
      std::string by;
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, key_at, by));
      if (by == "user") {
        s.sticky = StickyBy::kUser;
      } else if (by == "api_key") {
        s.sticky = StickyBy::kApiKey;
      } else if (by.rfind("header:", 0) == 0 && by.size() > 7) {
        s.sticky = StickyBy::kHeader;
        s.sticky_header = lower(by.substr(7));
      } else {
        return r.error(kv.second, key_at, "must be user, api_key or header:NAME");
      }
    } else {
      return r.error(kv.first, key_at, "is not a known key (arms, sticky)");
    }
  }
  if (!arms || !arms->IsSequence() || arms->size() < 2)
    return r.error(arms ? *arms : node, at + ".arms", "must list at least two arms ({model, weight})");
  double total = 0;
  for (size_t i = 0; i < arms->size(); ++i) {
    const std::string arm_at = at + ".arms[" + std::to_string(i) + "]";
    const YAML::Node arm_node = (*arms)[i];
    AUTOGLM_RETURN_IF_ERROR(read_map(r, arm_node, arm_at, "model, weight"));
    SplitArm arm;
    bool weighted = false;
    for (const auto& kv : arm_node) {
      const std::string key = kv.first.Scalar();
      if (key == "model") {
        AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, arm_at + ".model", arm.model));
      } else if (key == "weight") {
        weighted = true;
        AUTOGLM_RETURN_IF_ERROR(r.ranged<double>(kv.second, arm_at + ".weight", arm.weight, 0, 100));
      } else {
        return r.error(kv.first, arm_at + "." + key, "is not a known key (model, weight)");
      }
    }
    if (arm.model.empty()) return r.error(arm_node, arm_at + ".model", "is required");
    if (!weighted) return r.error(arm_node, arm_at + ".weight", "is required (a percentage)");
    for (const SplitArm& other : s.arms)
      if (other.model == arm.model)
        return r.error(arm_node, arm_at + ".model", "'" + arm.model + "' is already an arm");
    total += arm.weight;
    s.arms.push_back(std::move(arm));
  }
  if (std::abs(total - 100) > 1e-6)
    return r.error(*arms, at + ".arms", "weights must sum to 100 (they sum to " + shown(total) + ")");
  return Status::ok();
}

Status read_route(const ConfigReader& r, const YAML::Node& node, const std::string& name, Route& route) {
  const std::string at = "routes." + name;
  AUTOGLM_RETURN_IF_ERROR(read_map(r, node, at, "rules and default, cascade, or split"));
  route.name = name;
  int kinds = 0;
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar(), key_at = at + "." + key;
    if (key == "rules") {
      ++kinds;
      route.kind = RouteKind::kRules;
      AUTOGLM_RETURN_IF_ERROR(read_rules(r, kv.second, key_at, route));
    } else if (key == "default") {
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, key_at, route.default_model));
    } else if (key == "cascade") {
      ++kinds;
      route.kind = RouteKind::kCascade;
      AUTOGLM_RETURN_IF_ERROR(read_cascade(r, kv.second, key_at, route.cascade));
    } else if (key == "split") {
      ++kinds;
      route.kind = RouteKind::kSplit;
      AUTOGLM_RETURN_IF_ERROR(read_split(r, kv.second, key_at, route.split));
    } else {
      return r.error(kv.first, key_at, "is not a known key (rules, default, cascade, split)");
    }
  }
  if (kinds != 1) return r.error(node, at, "must have exactly one of rules, cascade and split");
  if (route.kind == RouteKind::kRules && route.default_model.empty())
    return r.error(node, at + ".default", "is required with rules (the model when no rule holds)");
  if (route.kind != RouteKind::kRules && !route.default_model.empty())
    return r.error(node, at + ".default", "belongs to rules only");
  return Status::ok();
}

}  // namespace

Status read_routes(const ConfigReader& r, const YAML::Node& node, RouteTable& routes) {
  if (!node.IsMap()) return r.error(node, "routes", "must map route names to routes");
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    if (name.empty()) return r.error(kv.first, "routes", "has a route without a name");
    Route route;
    AUTOGLM_RETURN_IF_ERROR(read_route(r, kv.second, name, route));
    routes[name] = std::move(route);
  }
  return Status::ok();
}

Status check_routes(const RouteTable& routes, const std::vector<std::string>& models, const std::string& origin) {
  std::string served;
  for (const std::string& m : models) served += (served.empty() ? "'" : ", '") + m + "'";
  for (const auto& [name, route] : routes) {
    if (std::find(models.begin(), models.end(), name) != models.end())
      return invalid_argument(origin + ": 'routes." + name + "' has the name of a model: give the route another");
    for (const std::string& m : route.models())
      if (std::find(models.begin(), models.end(), m) == models.end())
        return invalid_argument(origin + ": 'routes." + name + "' names the model '" + m +
                                "', which is not served (the models: " + served + ")");
  }
  return Status::ok();
}

}  // namespace autoglm
