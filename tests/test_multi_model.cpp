// Several models behind one server (stories260K, a random llama and a Hugging Face folder):
// picked by name, by rules, by a cascade's confidence and by a sticky A/B split, with
// per-{model, route} metrics, feedback, and routes reloaded while requests run.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "http_test_util.h"
#include "server/api.h"
#include "server/http/http_server.h"
#include "server_test_util.h"
#include "test_util.h"

namespace autoglm {
namespace {

using json = nlohmann::json;
using Headers = std::vector<std::pair<std::string, std::string>>;

std::string routes_yaml(int light_weight) {
  return R"(
routes:
  smart:
    rules:
      - if: {prompt_tokens_above: 60}
        model: random
      - if: {last_user_matches: "prove"}
        model: qwen
      - if: {tools: true}
        model: random
      - if: {header: {name: X-Tier, value: premium}}
        model: qwen
      - if: {api_key: sk-vip}
        model: random
    default: stories
  keep:
    cascade: {light: random, heavy: stories, tokens: 4, threshold: 0}
  escalate:
    cascade: {light: random, heavy: stories, tokens: 4, confidence: min, threshold: 1}
  ab:
    split:
      arms: [{model: stories, weight: )" +
         std::to_string(light_weight) + "}, {model: qwen, weight: " + std::to_string(100 - light_weight) +
         "}]\n      sticky: user\n";
}

std::string config_yaml(int light_weight = 50) {
  return "threads: 2\ncontext_window: 256\nkv_cache: {memory_mib: 32}\nmodels:\n  - {name: stories, path: " +
         test::shared_path("models/stories260K.gguf") +
         "}\n  - {name: random, path: " + test::shared_path("models/llama-2-tiny-random.gguf") +
         "}\n  - {name: qwen, path: " + test::shared_path("models/hf/qwen2-tiny") + "}\n" + routes_yaml(light_weight);
}

class MultiModel : public ::testing::Test {
 protected:
  void SetUp() override {
    AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
    AUTOGLM_REQUIRE_SHARED("models/llama-2-tiny-random.gguf");
    AUTOGLM_REQUIRE_SHARED("models/hf/qwen2-tiny/config.json");
    start();
  }
  void start() {
    auto config = parse_server_config(config_yaml(), "multi.yaml");
    ASSERT_TRUE(config.is_ok()) << config.status().message();
    api = std::make_unique<ApiService>(*config);
    server = std::make_unique<HttpServer>(*api, 2);
    ASSERT_TRUE(server->start("127.0.0.1", 0).is_ok());
    port = server->port();
    const Status loaded = api->load();
    ASSERT_TRUE(loaded.is_ok()) << loaded.message();
  }
  void restart() {
    server->stop();
    server.reset();
    api.reset();
    start();
  }
  void TearDown() override {
    if (server) server->stop();
  }
  test::HttpResult chat(const std::string& model, const std::string& content, json extra = json::object(),
                        const Headers& headers = {}) {
    json body = {{"model", model},
                 {"messages", {{{"role", "user"}, {"content", content}}}},
                 {"max_tokens", 6},
                 {"temperature", 0}};
    body.update(extra);
    return test::http_call(port, "POST", "/v1/chat/completions", body.dump(), headers);
  }
  static std::string content_of(const test::HttpResult& r) {
    const json j = r.j();
    return j.contains("choices") ? j["choices"][0]["message"]["content"].get<std::string>() : "(" + r.body + ")";
  }
  double metric(const std::string& selector) {
    return test::metric_in(test::http_call(port, "GET", "/metrics").body, selector);
  }
  std::unique_ptr<ApiService> api;
  std::unique_ptr<HttpServer> server;
  int port = 0;
};

TEST_F(MultiModel, ModelsAndRoutesAreListedAndPickedByName) {
  const json list = test::http_call(port, "GET", "/v1/models").j();
  std::set<std::string> ids;
  for (const json& m : list["data"]) ids.insert(m["id"].get<std::string>());
  EXPECT_EQ(ids, (std::set<std::string>{"stories", "random", "qwen", "smart", "keep", "escalate", "ab"}));
  const json ab = test::http_call(port, "GET", "/v1/models/ab").j();
  EXPECT_EQ(ab["kind"], "route");
  EXPECT_EQ(ab["route"]["type"], "split");
  EXPECT_EQ(ab["route"]["weights"]["qwen"], 50);

  for (const std::string name : {"stories", "random", "qwen"}) {
    const auto r = chat(name, "Hello there");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.j()["model"], name);
    EXPECT_EQ(r.header("X-AutoGLM-Model"), name);
    EXPECT_EQ(r.header("X-AutoGLM-Route"), "");
    EXPECT_EQ(metric("autoglm_served_requests_total{model=\"" + name + "\",route=\"\",outcome=\"ok\"}"), 1);
    EXPECT_GT(metric("autoglm_generation_tokens_total{model=\"" + name + "\"}"), 0);
  }
  // No model named: the first one.
  const auto unnamed = test::http_call(port, "POST", "/v1/completions", R"({"prompt": "Once", "max_tokens": 2})");
  EXPECT_EQ(unnamed.j()["model"], "stories");

  const auto missing = chat("gpt-4", "Hello");
  EXPECT_EQ(missing.status, 404);
  const std::string message = missing.j()["error"]["message"];
  EXPECT_NE(message.find("'gpt-4' does not exist; this server serves 'stories', 'random' and 'qwen'; routes: 'ab', "
                         "'escalate', 'keep', 'smart'"),
            std::string::npos)
      << message;
  // Each model's own tokenizer answers /tokenize; a route is not a tokenizer.
  const auto qwen_tokens = test::http_call(port, "POST", "/tokenize", R"({"model": "qwen", "content": "hello"})");
  const auto stories_tokens = test::http_call(port, "POST", "/tokenize", R"({"model": "stories", "content": "hello"})");
  EXPECT_NE(qwen_tokens.j()["tokens"], stories_tokens.j()["tokens"]);
  EXPECT_EQ(test::http_call(port, "POST", "/tokenize", R"({"model": "ab", "content": "x"})").status, 400);
}

TEST_F(MultiModel, RulesRouteAsConfigured) {
  struct Case {
    std::string content;
    json extra;
    Headers headers;
    std::string model, reason;
  };
  const json tools =
      json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}});
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += "one two ";
  const Case cases[] = {
      {"Hello", json::object(), {}, "stories", "default"},
      {long_text, json::object(), {}, "random", "rule 1 (prompt_tokens_above 60)"},
      {"please prove it", json::object(), {}, "qwen", "rule 2 (last_user_matches)"},
      {"Hello", {{"tools", tools}}, {}, "random", "rule 3 (tools)"},
      {"Hello", json::object(), {{"X-Tier", "premium"}}, "qwen", "rule 4 (header x-tier)"},
      {"Hello", json::object(), {{"X-Tier", "basic"}}, "stories", "default"},
      {"Hello", json::object(), {{"Authorization", "Bearer sk-vip"}}, "random", "rule 5 (api_key)"},
  };
  for (const Case& c : cases) {
    const auto r = chat("smart", c.content, c.extra, c.headers);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.j()["model"], c.model) << c.reason;
    EXPECT_EQ(r.header("X-AutoGLM-Model"), c.model);
    EXPECT_EQ(r.header("X-AutoGLM-Route"), "smart");
    EXPECT_EQ(r.header("X-AutoGLM-Route-Reason"), c.reason);
  }
  EXPECT_EQ(metric("autoglm_route_decisions_total{route=\"smart\",model=\"stories\",decision=\"default\"}"), 2);
  EXPECT_EQ(metric("autoglm_route_decisions_total{route=\"smart\",decision=\"rule\"}"), 5);
  EXPECT_EQ(metric("autoglm_served_requests_total{model=\"qwen\",route=\"smart\"}"), 2);
}

// The chunks of an SSE body: their JSON, [DONE] left out.
std::vector<json> sse_chunks(const std::string& body) {
  std::vector<json> out;
  std::stringstream lines(body);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("data: {", 0) == 0) out.push_back(json::parse(line.substr(6)));
  return out;
}

TEST_F(MultiModel, TheCascadeEscalatesExactlyBelowItsThreshold) {
  const std::string ask = "Tell me a story";
  const std::string light_alone = content_of(chat("random", ask)), heavy_alone = content_of(chat("stories", ask));
  ASSERT_NE(light_alone, heavy_alone);

  const auto kept = chat("keep", ask);  // threshold 0: any confidence will do
  ASSERT_EQ(kept.status, 200) << kept.body;
  EXPECT_EQ(kept.j()["model"], "random");
  EXPECT_EQ(content_of(kept), light_alone);
  EXPECT_NE(kept.header("X-AutoGLM-Route-Reason").find("kept"), std::string::npos);
  EXPECT_TRUE(kept.j()["choices"][0]["logprobs"].is_null());  // measured, not shown: none were asked for

  const auto escalated = chat("escalate", ask);  // threshold 1: a random model is never that sure
  ASSERT_EQ(escalated.status, 200) << escalated.body;
  EXPECT_EQ(escalated.j()["model"], "stories");
  EXPECT_EQ(escalated.header("X-AutoGLM-Model"), "stories");
  EXPECT_EQ(content_of(escalated), heavy_alone);
  EXPECT_NE(escalated.header("X-AutoGLM-Route-Reason").find("escalated"), std::string::npos);

  // Streamed: only the chosen model's chunks reach the client.
  for (const auto& [route, model, text] :
       {std::tuple{"escalate", "stories", heavy_alone}, std::tuple{"keep", "random", light_alone}}) {
    const auto streamed = chat(route, ask, {{"stream", true}});
    ASSERT_EQ(streamed.status, 200);
    EXPECT_EQ(streamed.header("X-AutoGLM-Model"), model);
    std::string joined;
    for (const json& c : sse_chunks(streamed.body)) {
      EXPECT_EQ(c["model"], model);
      if (!c["choices"].empty() && c["choices"][0]["delta"].contains("content"))
        joined += c["choices"][0]["delta"]["content"].get<std::string>();
    }
    EXPECT_EQ(joined, text) << route;
  }
  // Logprobs asked for come as asked, though the light request measured with one alternative.
  const auto with_logprobs = chat("keep", ask, {{"logprobs", true}, {"top_logprobs", 3}});
  const json items = with_logprobs.j()["choices"][0]["logprobs"]["content"];
  ASSERT_FALSE(items.empty()) << with_logprobs.body;
  for (const json& item : items) EXPECT_EQ(item["top_logprobs"].size(), 3u);

  EXPECT_EQ(metric("autoglm_route_decisions_total{route=\"escalate\",model=\"stories\",decision=\"escalated\"}"), 2);
  EXPECT_EQ(metric("autoglm_route_decisions_total{route=\"keep\",model=\"random\",decision=\"kept\"}"), 3);
  EXPECT_EQ(metric("autoglm_served_requests_total{model=\"stories\",route=\"escalate\",outcome=\"ok\"}"), 2);
}

TEST_F(MultiModel, TheSplitIsStickyPerUserAcrossARestartAndCountsPerArm) {
  std::map<std::string, std::string> arm_of;
  std::map<std::string, std::string> response_of;
  for (int u = 0; u < 12; ++u) {
    const std::string user = "user-" + std::to_string(u);
    const auto r = chat("ab", "Hi", {{"user", user}, {"max_tokens", 2}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("X-AutoGLM-Route"), "ab");
    EXPECT_EQ(r.j()["model"], r.header("X-AutoGLM-Model"));
    arm_of[user] = r.header("X-AutoGLM-Model");
    response_of[user] = r.j()["id"];
    EXPECT_EQ(chat("ab", "Again", {{"user", user}, {"max_tokens", 1}}).header("X-AutoGLM-Model"), arm_of[user]);
  }
  std::map<std::string, int> per_arm;
  for (const auto& [user, arm] : arm_of) ++per_arm[arm];
  EXPECT_EQ(per_arm.size(), 2u);  // 12 users on a 50/50 split: both arms
  for (const auto& [arm, n] : per_arm) {
    EXPECT_EQ(metric("autoglm_served_requests_total{model=\"" + arm + "\",route=\"ab\",outcome=\"ok\"}"), 2 * n);
    EXPECT_EQ(metric("autoglm_time_to_first_token_seconds_count{model=\"" + arm + "\",route=\"ab\"}"), 2 * n);
    EXPECT_EQ(metric("autoglm_route_decisions_total{route=\"ab\",model=\"" + arm + "\",decision=\"arm\"}"), 2 * n);
  }
  // Feedback lands on the arm that answered.
  const std::string user = arm_of.begin()->first, arm = arm_of.begin()->second;
  auto feedback = [&](const json& body) { return test::http_call(port, "POST", "/v1/feedback", body.dump()); };
  EXPECT_EQ(feedback({{"response_id", response_of[user]}, {"thumbs", "up"}}).status, 200);
  EXPECT_EQ(feedback({{"response_id", response_of[user]}, {"score", 4}, {"comment", "good"}}).status, 200);
  EXPECT_EQ(metric("autoglm_feedback_total{model=\"" + arm + "\",route=\"ab\",rating=\"up\"}"), 1);
  EXPECT_EQ(metric("autoglm_feedback_total{model=\"" + arm + "\",route=\"ab\",rating=\"score\"}"), 1);
  EXPECT_EQ(metric("autoglm_feedback_score_total{model=\"" + arm + "\",route=\"ab\"}"), 4);
  EXPECT_EQ(feedback({{"response_id", "chatcmpl-nope"}, {"thumbs", "up"}}).status, 404);
  const auto bad = feedback({{"response_id", response_of[user]}, {"thumbs", "sideways"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.j()["error"]["param"], "thumbs");
  EXPECT_EQ(feedback({{"response_id", response_of[user]}}).j()["error"]["param"], "thumbs");
  // The override header forces an arm (tests, demos).
  const auto forced = chat("ab", "Hi", {{"user", user}}, {{"X-AutoGLM-Arm", arm == "qwen" ? "stories" : "qwen"}});
  EXPECT_NE(forced.header("X-AutoGLM-Model"), arm);
  EXPECT_NE(forced.header("X-AutoGLM-Route-Reason").find("override"), std::string::npos);

  restart();
  for (const auto& [u, a] : arm_of)
    EXPECT_EQ(chat("ab", "Hi", {{"user", u}, {"max_tokens", 1}}).header("X-AutoGLM-Model"), a) << u;
}

TEST_F(MultiModel, ReloadedWeightsApplyToNewRequestsWhileOthersRun) {
  test::HttpResult running;
  auto all_stories = parse_server_config(config_yaml(100), "multi.yaml");
  ASSERT_TRUE(all_stories.is_ok());
  // The engines are held until the reload is done: the request is in flight then, not finished.
  std::optional<test::EngineHold> hold(std::in_place, *api);
  std::thread long_request([&] {
    running = chat("ab", "Once upon a time",
                   {{"user", "user-0"}, {"max_tokens", 150}, {"ignore_eos", true}, {"stream", true}});
  });
  const bool in_flight = test::wait_until([&] { return api->in_flight() == 1; });
  const Status reloaded = in_flight ? api->reload_routes(*all_stories) : Status::ok();
  hold.reset();
  if (!in_flight || !reloaded.is_ok()) long_request.join();
  ASSERT_TRUE(in_flight) << "the long request never got in flight";
  ASSERT_TRUE(reloaded.is_ok()) << reloaded.message();
  for (int u = 0; u < 8; ++u)
    EXPECT_EQ(chat("ab", "Hi", {{"user", "user-" + std::to_string(u)}, {"max_tokens", 1}}).header("X-AutoGLM-Model"),
              "stories");
  long_request.join();
  const auto chunks = sse_chunks(running.body);
  ASSERT_FALSE(chunks.empty()) << running.body;
  std::string finish;
  for (const json& c : chunks)
    if (!c["choices"].empty() && c["choices"][0]["finish_reason"].is_string())
      finish = c["choices"][0]["finish_reason"];
  EXPECT_EQ(finish, "length");  // the request in flight went on to its end
  // The models come from the start only: a reload that changes them is refused, the routes stay.
  auto other_models = parse_server_config("models:\n  - {name: stories, path: x.gguf}\n", "m.yaml");
  ASSERT_TRUE(other_models.is_ok());
  const Status refused = api->reload_routes(*other_models);
  EXPECT_NE(refused.message().find("restart the server"), std::string::npos) << refused.message();
  EXPECT_EQ(test::http_call(port, "GET", "/v1/models/ab").status, 200);
}

TEST_F(MultiModel, TwoModelsUnderConcurrentLoadBothFinish) {
  std::vector<std::thread> clients;
  std::vector<test::HttpResult> results(8);
  for (size_t i = 0; i < results.size(); ++i)
    clients.emplace_back([&, i] {
      results[i] = chat(i % 2 ? "qwen" : "stories", "Story " + std::to_string(i),
                        {{"max_tokens", 24}, {"ignore_eos", true}, {"stream", i % 4 < 2}});
    });
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < results.size(); ++i) EXPECT_EQ(results[i].status, 200) << i << results[i].body;
  EXPECT_GE(metric("autoglm_generation_tokens_total{model=\"stories\"}"), 4 * 24);
  EXPECT_GE(metric("autoglm_generation_tokens_total{model=\"qwen\"}"), 4 * 24);
}

}  // namespace
}  // namespace autoglm

namespace autoglm {
namespace {

// served_model_name (--served-model-name, --alias): the name a client's fixed model id asks for.
TEST(ServedModelName, TheFirstNameReplacesTheFilesAndTheRestAnswerToo) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  auto cfg = parse_server_config("model: " + test::shared_path("models/stories260K.gguf") +
                                     "\nserved_model_name: [autoglm-phone-9b, phone]\nthreads: 2\n",
                                 "t.yaml");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().message();
  ApiService api(*cfg);
  ASSERT_TRUE(api.load().is_ok());
  HttpServer server(api, 2);
  ASSERT_TRUE(server.start("127.0.0.1", 0).is_ok());
  const int port = server.port();
  const auto ask = [&](const std::string& model) {
    const json body = {{"model", model}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
    return test::http_call(port, "POST", "/v1/chat/completions", body.dump());
  };
  const auto first = ask("autoglm-phone-9b");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(json::parse(first.body)["model"], "autoglm-phone-9b");
  const auto alias = ask("phone");
  ASSERT_EQ(alias.status, 200) << alias.body;
  EXPECT_EQ(json::parse(alias.body)["model"], "autoglm-phone-9b") << "replies name the first";
  EXPECT_EQ(ask("stories260K.gguf").status, 404) << "the file's name is replaced, as vLLM's is";
  const json models = json::parse(test::http_call(port, "GET", "/v1/models").body)["data"];
  ASSERT_GE(models.size(), 2u);
  EXPECT_EQ(models[0]["id"], "autoglm-phone-9b");
  EXPECT_EQ(models[1]["id"], "phone");
  EXPECT_EQ(test::http_call(port, "GET", "/v1/models/phone").status, 200);
  server.stop();
}

TEST(ServedModelName, ConflictsAndMisplacedNamesAreConfigErrors) {
  auto both = parse_server_config(
      "models:\n  - {name: a, path: x.gguf, served_model_name: [shared]}\n"
      "  - {name: b, path: y.gguf, served_model_name: shared}\n",
      "t.yaml");
  ASSERT_FALSE(both.is_ok());
  EXPECT_NE(both.status().message().find("'models[1].served_model_name' 'shared' is already a name of model 'a'"),
            std::string::npos)
      << both.status().message();
  auto top = parse_server_config("served_model_name: x\nmodels:\n  - {name: a, path: x.gguf}\n", "t.yaml");
  ASSERT_FALSE(top.is_ok());
  EXPECT_NE(top.status().message().find("served_model_name"), std::string::npos) << top.status().message();
  auto empty = parse_server_config("served_model_name: ['']\n", "t.yaml");
  EXPECT_FALSE(empty.is_ok());
}

}  // namespace
}  // namespace autoglm
