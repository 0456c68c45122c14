// Routes: virtual model names that pick one of the served models per request. The policy
// here is plain data in, a choice out (no engine, no HTTP), so it is tested without a model.
//   rules:   ordered conditions, the first that holds names the model; else the default
//   cascade: the light model answers unless its confidence over the first tokens is low
//            (the decision itself is made by the server's cascade stream)
//   split:   weighted arms, sticky per user by a stable hash (an A/B test)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace autoglm {

// What a rule may look at in a request.
struct RouteFacts {
  int64_t prompt_tokens = 0;  // rendered by the route's default model
  std::string last_user_message;
  bool has_tools = false;
  bool has_response_format = false;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-case
  std::string api_key;
  std::string user;  // the body's `user`
  std::string header(const std::string& lower_name) const;
};

// Every condition that is set must hold.
struct RuleCondition {
  std::optional<int64_t> prompt_tokens_above, prompt_tokens_below;
  std::string last_user_matches;  // the pattern's text, for messages
  std::shared_ptr<const std::regex> last_user_regex;
  std::optional<bool> tools, response_format;
  std::optional<std::pair<std::string, std::string>> header;  // lower-case name, exact value
  std::optional<std::string> api_key;
  bool holds(const RouteFacts& facts) const;
  std::string describe() const;  // "prompt_tokens_above 200, tools" (why a rule chose)
};

struct RouteRule {
  RuleCondition when;
  std::string model;
};

enum class ConfidenceMeasure { kMean, kMin };

struct CascadeRoute {
  std::string light, heavy;
  int32_t tokens = 8;  // the light model's first tokens the decision looks at (and holds back)
  ConfidenceMeasure measure = ConfidenceMeasure::kMean;
  double threshold = 0.5;  // confidence (top-1 probability) below this: the heavy model answers
};

struct SplitArm {
  std::string model;
  double weight = 0;  // percent; the arms sum to 100
};

enum class StickyBy { kUser, kApiKey, kHeader };

struct SplitRoute {
  std::vector<SplitArm> arms;
  StickyBy sticky = StickyBy::kUser;
  std::string sticky_header;  // lower-case, with StickyBy::kHeader
};

enum class RouteKind { kRules, kCascade, kSplit };

struct Route {
  std::string name;
  RouteKind kind = RouteKind::kRules;
  std::vector<RouteRule> rules;
  std::string default_model;  // rules: when none holds
  CascadeRoute cascade;
  SplitRoute split;
  std::vector<std::string> models() const;  // every model the route may pick
};

using RouteTable = std::map<std::string, Route>;

// The header that picks a split's arm by model name (tests, demos): X-AutoGLM-Arm.
inline constexpr const char* kArmOverrideHeader = "x-autoglm-arm";

struct RouteChoice {
  std::string model;
  std::string decision;  // the kind of reason, for metrics: rule, default, arm, override
  std::string reason;    // in words: "rule 2 (tools)", "default", "arm light (sticky user)", ...
};

// rules: the first rule that holds, else the default.
RouteChoice choose_by_rules(const Route& route, const RouteFacts& facts);
// split: the override header's arm when it names one; else by the sticky key's hash (a
// request without one: `random_draw`, uniform in [0, 1)).
RouteChoice choose_arm(const Route& route, const RouteFacts& facts, double random_draw);
// A sticky key's place in [0, 1): the same on every machine and every run.
double sticky_point(const std::string& route, const std::string& key);

}  // namespace autoglm
