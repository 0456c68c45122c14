// Routes as policy (no model, no HTTP): rules, arms and their stickiness; and `models:` and
// `routes:` as configuration, whose errors name the key path.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/read_file.h"
#include "server/config/config.h"
#include "server/routing/routing.h"

namespace autoglm {
namespace {

// Where two users fall in [0, 1) (computed once; see AUserKeepsTheirArmAndTheHashIsFixed).
constexpr double kAlicePoint = 0.9435704263535889;
constexpr double kUser42Point = 0.73146833397948918;

const char* kModels = R"(
models:
  - {name: light, path: a.gguf}
  - {name: heavy, path: b.gguf, context_window: 2048, kv_cache_share: 0.75}
)";

Result<ServerConfig> parse(const std::string& routes) {
  return parse_server_config(std::string(kModels) + routes, "r.yaml");
}

std::string error_of(const std::string& routes) {
  auto c = parse(routes);
  return c ? "(no error)" : c.status().message();
}

TEST(RouteConfig, ModelsInheritTheTopLevelAndSetTheirOwn) {
  auto c = parse_server_config(std::string("context_window: 1024\nquantize: q8_0\n") + kModels, "r.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const auto served = served_models(*c);
  ASSERT_EQ(served.size(), 2u);
  EXPECT_EQ(served[0].name, "light");
  EXPECT_EQ(served[0].config->model, "a.gguf");
  EXPECT_EQ(served[0].config->runtime.context_window, 1024);
  EXPECT_EQ(served[0].config->runtime.quantize, "q8_0");
  EXPECT_EQ(served[1].config->runtime.context_window, 2048);
  EXPECT_DOUBLE_EQ(served[1].kv_cache_share, 0.75);
  // The single `model` is one served model named by its file.
  auto single = parse_server_config("model: /x/y/stories.gguf\n", "s.yaml");
  ASSERT_TRUE(single.is_ok());
  EXPECT_EQ(served_model_names(*single), std::vector<std::string>{"stories.gguf"});
}

TEST(RouteConfig, ModelErrorsNameTheEntry) {
  auto both = parse_server_config(std::string("model: x.gguf\n") + kModels, "r.yaml");
  EXPECT_NE(both.status().message().find("'models' and 'model' cannot both be given"), std::string::npos);
  auto bad_key = parse_server_config("models:\n  - {name: a, path: a.gguf, port: 1}\n", "r.yaml");
  EXPECT_NE(bad_key.status().message().find("'models[0].port' is not a known key"), std::string::npos)
      << bad_key.status().message();
  auto bad_value = parse_server_config("models:\n  - {name: a, path: a.gguf, context_window: 1}\n", "r.yaml");
  EXPECT_NE(bad_value.status().message().find("'models[0].context_window' must be between"), std::string::npos)
      << bad_value.status().message();
  auto spec = parse_server_config("models:\n  - {name: a, path: a.gguf, speculative: {method: magic}}\n", "r.yaml");
  EXPECT_NE(spec.status().message().find("'models[0].speculative.method'"), std::string::npos)
      << spec.status().message();
  auto twice = parse_server_config("models:\n  - {name: a, path: a.gguf}\n  - {name: a, path: b.gguf}\n", "r.yaml");
  EXPECT_NE(twice.status().message().find("r.yaml:3: 'models[1].name' 'a' is already the name of a model"),
            std::string::npos)
      << twice.status().message();
  auto no_path = parse_server_config("models:\n  - {name: a}\n", "r.yaml");
  EXPECT_NE(no_path.status().message().find("'models[0].path' is required"), std::string::npos);
  auto shares = parse_server_config(
      "models:\n  - {name: a, path: a.gguf, kv_cache_share: 0.6}\n  - {name: b, path: b, kv_cache_share: 0.6}\n",
      "r.yaml");
  EXPECT_NE(shares.status().message().find("sum to at most 1 (they sum to 1.2)"), std::string::npos)
      << shares.status().message();
}

TEST(RouteConfig, RouteErrorsNameTheKeyPath) {
  const std::pair<const char*, const char*> cases[] = {
      {"routes:\n  ab:\n    split:\n      arms: [{model: light, weight: 90}, {model: heavy, weight: 20}]\n",
       "'routes.ab.split.arms' weights must sum to 100 (they sum to 110)"},
      {"routes:\n  ab:\n    split:\n      arms: [{model: light, weight: 90}, {model: large, weight: 10}]\n",
       "'routes.ab' names the model 'large', which is not served (the models: 'light', 'heavy')"},
      {"routes:\n  c:\n    cascade: {light: light, heavy: heavy, threshold: 1.5}\n",
       "'routes.c.cascade.threshold' must be between 0"},
      {"routes:\n  c:\n    cascade: {light: light, heavy: light}\n", "needs two different models"},
      {"routes:\n  r:\n    rules: [{if: {last_user_matches: \"(\"}, model: heavy}]\n    default: light\n",
       "'routes.r.rules[0].if.last_user_matches' is not a valid regular expression"},
      {"routes:\n  r:\n    rules: [{if: {colour: red}, model: heavy}]\n    default: light\n",
       "'routes.r.rules[0].if.colour' is not a known key"},
      {"routes:\n  r:\n    rules: [{if: {tools: true}, model: heavy}]\n", "'routes.r.default' is required"},
      {"routes:\n  light:\n    split:\n      arms: [{model: light, weight: 50}, {model: heavy, weight: 50}]\n",
       "'routes.light' has the name of a model"},
      {"routes:\n  x:\n    cascade: {light: light, heavy: heavy}\n    rules: []\n    default: light\n",
       "must have exactly one of rules, cascade and split"},
      {"routes:\n  ab:\n    split:\n      arms: [{model: light, weight: 50}, {model: heavy, weight: 50}]\n"
       "      sticky: cookie\n",
       "'routes.ab.split.sticky' must be user, api_key or header:NAME"},
  };
  for (const auto& [yaml, expected] : cases) {
    const std::string message = error_of(yaml);
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_EQ(message.rfind("r.yaml:", 0), 0u) << message;  // the file, and a line where the key has one
  }
}

TEST(RouteConfig, TheExampleConfigurationParses) {
  const std::string path = std::string(AUTOGLM_SOURCE_DIR) + "/config/routing.example.yaml";
  auto c = load_server_config(path);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(served_model_names(*c), (std::vector<std::string>{"light", "heavy"}));
  ASSERT_EQ(c->routes.size(), 3u);
  EXPECT_EQ(c->routes.at("smart").kind, RouteKind::kRules);
  EXPECT_EQ(c->routes.at("smart").rules.size(), 5u);
  EXPECT_EQ(c->routes.at("auto").kind, RouteKind::kCascade);
  EXPECT_DOUBLE_EQ(c->routes.at("auto").cascade.threshold, 0.6);
  EXPECT_EQ(c->routes.at("experiment").split.arms[1].weight, 10);
  EXPECT_EQ(served_models(*c)[1].config->runtime.quantize, "q4_k");
  EXPECT_EQ(served_models(*c)[0].config->runtime.context_window, 8192);
}

Route rules_route() {
  auto c = parse(R"(
routes:
  smart:
    rules:
      - if: {prompt_tokens_above: 100}
        model: heavy
      - if: {last_user_matches: "prove|derive"}
        model: heavy
      - if: {tools: true, api_key: sk-a}
        model: heavy
      - if: {header: {name: X-Tier, value: premium}}
        model: heavy
      - if: {response_format: true, prompt_tokens_below: 10}
        model: heavy
    default: light
)");
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return c->routes.at("smart");
}

TEST(RouteRules, TheFirstRuleThatHoldsChooses) {
  const Route route = rules_route();
  RouteFacts f;
  f.prompt_tokens = 50;
  EXPECT_EQ(choose_by_rules(route, f).model, "light");
  EXPECT_EQ(choose_by_rules(route, f).reason, "default");
  f.prompt_tokens = 101;
  EXPECT_EQ(choose_by_rules(route, f).model, "heavy");
  EXPECT_EQ(choose_by_rules(route, f).reason, "rule 1 (prompt_tokens_above 100)");
  f.prompt_tokens = 100;  // above, not at
  EXPECT_EQ(choose_by_rules(route, f).model, "light");
  f.last_user_message = "please derive the formula";
  EXPECT_EQ(choose_by_rules(route, f).reason, "rule 2 (last_user_matches)");
  f.last_user_message = "hello";
  f.has_tools = true;  // and the key: both must hold
  EXPECT_EQ(choose_by_rules(route, f).model, "light");
  f.api_key = "sk-a";
  EXPECT_EQ(choose_by_rules(route, f).reason, "rule 3 (tools, api_key)");
  f.api_key = "sk-b";
  f.headers = {{"x-tier", "premium"}};
  EXPECT_EQ(choose_by_rules(route, f).reason, "rule 4 (header x-tier)");
  f.headers = {{"x-tier", "basic"}};
  f.has_response_format = true;
  EXPECT_EQ(choose_by_rules(route, f).model, "light");  // 100 tokens: not below 10
  f.prompt_tokens = 5;
  EXPECT_EQ(choose_by_rules(route, f).reason, "rule 5 (prompt_tokens_below 10, response_format)");
}

Route split_route(const std::string& sticky = "user") {
  auto c = parse(
      "routes:\n  ab:\n    split:\n      arms: [{model: light, weight: 90}, {model: heavy, weight: 10}]\n"
      "      sticky: " +
      sticky + "\n");
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return c->routes.at("ab");
}

TEST(RouteSplit, ArmsFollowTheirWeightsOverManyUsers) {
  const Route route = split_route();
  std::map<std::string, int> count;
  for (int u = 0; u < 2000; ++u) {
    RouteFacts f;
    f.user = "user-" + std::to_string(u);
    ++count[choose_arm(route, f, 0.0).model];
  }
  // Binomial(2000, 0.1): mean 200, standard deviation 13.4; five of them either way.
  EXPECT_GT(count["heavy"], 200 - 67);
  EXPECT_LT(count["heavy"], 200 + 67);
  EXPECT_EQ(count["light"] + count["heavy"], 2000);
}

TEST(RouteSplit, AUserKeepsTheirArmAndTheHashIsFixed) {
  const Route route = split_route();
  RouteFacts f;
  f.user = "alice";
  const std::string first = choose_arm(route, f, 0.0).model;
  for (double draw : {0.0, 0.5, 0.99}) EXPECT_EQ(choose_arm(route, f, draw).model, first);
  EXPECT_EQ(choose_arm(route, f, 0.0).reason, "arm " + first + " (sticky user)");
  // The places are part of the contract: a user keeps their arm after a restart, an upgrade,
  // and on every replica. These values must never change.
  EXPECT_DOUBLE_EQ(sticky_point("ab", "alice"), sticky_point("ab", "alice"));
  EXPECT_NEAR(sticky_point("ab", "alice"), kAlicePoint, 1e-15);
  EXPECT_NEAR(sticky_point("experiment", "user-42"), kUser42Point, 1e-15);
  EXPECT_NE(sticky_point("ab", "alice"), sticky_point("cd", "alice"));  // routes split independently
}

TEST(RouteSplit, WithoutAStickyKeyTheDrawChoosesAndTheOverrideWins) {
  const Route route = split_route("header:X-Session");
  RouteFacts f;
  EXPECT_EQ(choose_arm(route, f, 0.05).model, "light");
  EXPECT_EQ(choose_arm(route, f, 0.95).model, "heavy");
  EXPECT_EQ(choose_arm(route, f, 0.95).reason, "arm heavy (random: no header x-session)");
  f.headers = {{"x-session", "s-1"}};
  EXPECT_EQ(choose_arm(route, f, 0.95).model, choose_arm(route, f, 0.05).model);  // sticky now
  f.headers.push_back({kArmOverrideHeader, "heavy"});
  EXPECT_EQ(choose_arm(route, f, 0.0).model, "heavy");
  EXPECT_EQ(choose_arm(route, f, 0.0).decision, "override");
  f.headers.back().second = "nonexistent";  // not an arm: the split decides
  EXPECT_EQ(choose_arm(route, f, 0.0).decision, "arm");
}

}  // namespace
}  // namespace autoglm
