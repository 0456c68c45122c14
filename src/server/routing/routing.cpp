#include "server/routing/routing.h"

#include <algorithm>

namespace autoglm {

std::string RouteFacts::header(const std::string& lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return value;
  return "";
}

bool RuleCondition::holds(const RouteFacts& f) const {
  if (prompt_tokens_above && !(f.prompt_tokens > *prompt_tokens_above)) return false;
  if (prompt_tokens_below && !(f.prompt_tokens < *prompt_tokens_below)) return false;
  if (last_user_regex && !std::regex_search(f.last_user_message, *last_user_regex)) return false;
  if (tools && *tools != f.has_tools) return false;
  if (response_format && *response_format != f.has_response_format) return false;
  if (header && f.header(header->first) != header->second) return false;
  if (api_key && *api_key != f.api_key) return false;
  return true;
}

std::string RuleCondition::describe() const {
  std::vector<std::string> parts;
  if (prompt_tokens_above) parts.push_back("prompt_tokens_above " + std::to_string(*prompt_tokens_above));
  if (prompt_tokens_below) parts.push_back("prompt_tokens_below " + std::to_string(*prompt_tokens_below));
  if (last_user_regex) parts.push_back("last_user_matches");
  if (tools) parts.push_back(*tools ? "tools" : "no tools");
  if (response_format) parts.push_back(*response_format ? "response_format" : "no response_format");
  if (header) parts.push_back("header " + header->first);
  if (api_key) parts.push_back("api_key");
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out.empty() ? "always" : out;
}

std::vector<std::string> Route::models() const {
  std::vector<std::string> out;
  switch (kind) {
    case RouteKind::kRules:
      for (const RouteRule& r : rules) out.push_back(r.model);
      out.push_back(default_model);
      break;
    case RouteKind::kCascade: out = {cascade.light, cascade.heavy}; break;
    case RouteKind::kSplit:
      for (const SplitArm& a : split.arms) out.push_back(a.model);
      break;
  }
  std::vector<std::string> unique;
  for (const std::string& m : out)
    if (std::find(unique.begin(), unique.end(), m) == unique.end()) unique.push_back(m);
  return unique;
}

RouteChoice choose_by_rules(const Route& route, const RouteFacts& facts) {
  for (size_t i = 0; i < route.rules.size(); ++i)
    if (route.rules[i].when.holds(facts))
      return {route.rules[i].model, "rule",
              "rule " + std::to_string(i + 1) + " (" + route.rules[i].when.describe() + ")"};
  return {route.default_model, "default", "default"};
}

namespace {

// FNV-1a, then a 64-bit finalizer (MurmurHash3's fmix64): neighbouring keys ("user-1",
// "user-2") land far apart.
uint64_t stable_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

std::string sticky_key(const SplitRoute& split, const RouteFacts& facts, std::string& by) {
  switch (split.sticky) {
    case StickyBy::kUser: by = "user"; return facts.user;
    case StickyBy::kApiKey: by = "api key"; return facts.api_key;
    case StickyBy::kHeader: by = "header " + split.sticky_header; return facts.header(split.sticky_header);
  }
  return "";
}

}  // namespace

double sticky_point(const std::string& route, const std::string& key) {
  // The top 53 bits: every double in [0, 1) a multiple of 2^-53.
  return double(stable_hash(route + '\n' + key) >> 11) * 0x1.0p-53;
}

RouteChoice choose_arm(const Route& route, const RouteFacts& facts, double random_draw) {
  const SplitRoute& split = route.split;
  const std::string forced = facts.header(kArmOverrideHeader);
  for (const SplitArm& arm : split.arms)
    if (!forced.empty() && arm.model == forced)
      return {arm.model, "override", "arm " + arm.model + " (override header)"};
  std::string by;
  const std::string key = sticky_key(split, facts, by);
  const double point = key.empty() ? random_draw : sticky_point(route.name, key);
  double total = 0;
  for (const SplitArm& arm : split.arms) total += arm.weight;
  double cumulative = 0;
  for (const SplitArm& arm : split.arms) {
    cumulative += arm.weight / total;
    if (point < cumulative)
      return {arm.model, "arm",
              "arm " + arm.model + (key.empty() ? " (random: no " + by + ")" : " (sticky " + by + ")")};
  }
  return {split.arms.back().model, "arm", "arm " + split.arms.back().model};
}

}  // namespace autoglm
