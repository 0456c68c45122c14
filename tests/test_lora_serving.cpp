// LoRA adapters behind the HTTP API on stories260K: named in the configuration and loaded or
// unloaded at run time (vLLM's routes, behind the API key), chosen by `model`, listed with
// their base as parent, counted per adapter, never answered from the base's cache; errors
// name the field, the file or the tensor.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include <thread>

#include <nlohmann/json.hpp>

#include "http_test_util.h"
#include "lora_test_util.h"
#include "server/api.h"
#include "server/config/config.h"
#include "server/http/http_server.h"
#include "server_test_util.h"
#include "test_util.h"

namespace autoglm {
namespace {

using json = nlohmann::json;

class LoraServing : public test::ServerTest {
 protected:
  void SetUp() override {
    AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
    auto base = Model::load(test::shared_path("models/stories260K.gguf"));
    ASSERT_TRUE(base.is_ok());
    for (int i = 0; i < 2; ++i) {
      adapters.push_back(test::test_temp("serve-lora-" + std::to_string(i) + ".gguf"));
      test::write_gguf_adapter(adapters.back(), "llama", test::random_pairs(**base, test::kLoraAll, 4, 20 + i), 16.0f);
    }
    wrong = test::test_temp("serve-lora-wrong.gguf");
    auto pairs = test::random_pairs(**base, {"ffn_down.weight"}, 4, 3);
    pairs[0].n_out += 1;
    pairs[0].b.resize(size_t(pairs[0].n_out * pairs[0].rank));
    test::write_gguf_adapter(wrong, "llama", pairs, 4.0f);
  }
  // stories260K behind the key sk-lora.
  void start(ServerConfig cfg) {
    cfg.api_keys = {"sk-lora"};
    test::ServerTest::start(cfg);
  }
  test::HttpResult post(const std::string& path, const json& body, bool with_key = true) {
    std::vector<std::pair<std::string, std::string>> h;
    if (with_key) h.emplace_back("Authorization", "Bearer sk-lora");
    return test::http_call(port, "POST", path, body.dump(), h);
  }
  test::HttpResult get(const std::string& path) { return test::ServerTest::get(path, "sk-lora"); }
  static json completion(const std::string& model, int max_tokens = 24) {
    json j = {{"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}};
    if (!model.empty()) j["model"] = model;
    return j;
  }
  // Safe in a client thread: a reply without a text fails the test, it does not throw.
  static std::string text_of(const test::HttpResult& r) { return test::string_at(r, "/choices/0/text"); }
  std::vector<std::string> adapters;
  std::string wrong;
};

TEST_F(LoraServing, AdaptersFromTheConfigAreChosenByModelListedAndCounted) {
  ServerConfig cfg;
  cfg.lora_adapters = {{"sql", adapters[0], 1.0f}, {"chat", adapters[1], 0.5f}};
  cfg.response_cache.enabled = true;
  start(cfg);
  const json models = get("/v1/models").j();
  std::map<std::string, json> by_id;
  for (const json& m : models["data"]) by_id[m["id"]] = m;
  ASSERT_TRUE(by_id.count("sql") && by_id.count("chat")) << models.dump();
  EXPECT_EQ(by_id["sql"]["parent"], "stories260K.gguf");
  EXPECT_EQ(by_id["sql"]["kind"], "lora");
  EXPECT_EQ(get("/v1/models/chat").j()["parent"], "stories260K.gguf");
  const auto base = post("/v1/completions", completion(""));
  const auto sql = post("/v1/completions", completion("sql"));
  ASSERT_EQ(sql.status, 200) << sql.body;
  EXPECT_EQ(sql.j()["model"], "sql");
  EXPECT_EQ(sql.header("X-AutoGLM-Model"), "sql");
  EXPECT_EQ(sql.header("X-AutoGLM-Cache"), "miss");  // the base's cached answer is not the adapter's
  EXPECT_NE(text_of(sql), text_of(base));
  EXPECT_EQ(post("/v1/completions", completion("sql")).header("X-AutoGLM-Cache"), "hit");
  EXPECT_NE(text_of(post("/v1/completions", completion("chat"))), text_of(sql));
  // The same adapter through the runtime API alone gives the same text.
  RuntimeOptions o;
  o.threads = 2;
  o.kv_memory_mib = 16;
  auto rt = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
  ASSERT_TRUE(rt.is_ok());
  ASSERT_TRUE((*rt)->load_lora("sql", adapters[0]).is_ok());
  Request r;
  r.text = "Once upon a time";
  r.max_tokens = 24;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  r.lora = "sql";
  EXPECT_EQ((*rt)->generate_text(r).value(), text_of(sql));
  const std::string metrics = get("/metrics").body;
  EXPECT_EQ(test::metric_in(metrics, "autoglm_served_requests_total{model=\"sql\"}"), 2);
  EXPECT_GT(test::metric_in(metrics, "autoglm_served_tokens_total{model=\"sql\",kind=\"completion\"}"), 0);
  EXPECT_NE(metrics.find("autoglm_lora_requests_info{model=\"stories260K.gguf\",max_lora=\"8\""), std::string::npos);
  EXPECT_EQ(test::metric_in(metrics, "autoglm_lora_adapters_loaded"), 2);
}

// Every sample line of the exposition text is well formed: name, escaped labels, value.
bool exposition_parses(const std::string& text, std::string& bad_line) {
  static const std::regex sample(R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})? \S+$)");
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line[0] != '#' && !std::regex_match(line, sample)) {
      bad_line = line;
      return false;
    }
  return true;
}

// An adapter's name is the client's choice: in /metrics its quote, backslash and newline are
// escaped, so the scrape (which Prometheus rejects whole for one bad line) still parses.
TEST_F(LoraServing, AnAdapterNameThatNeedsEscapingKeepsMetricsParseable) {
  const ServerConfig defaults;
  start(defaults);
  const std::string name = "we\"ird\\na\nme";
  ASSERT_EQ(post("/v1/load_lora_adapter", {{"lora_name", name}, {"lora_path", adapters[0]}}).status, 200);
  std::thread client([&] { post("/v1/completions", completion(name, 3000)); });
  const std::string escaped = "running_lora_adapters=\"we\\\"ird\\\\na\\nme\"";
  std::string metrics;
  test::wait_until([&] {
    metrics = get("/metrics").body;
    return metrics.find(escaped) != std::string::npos;
  });
  client.join();
  EXPECT_NE(metrics.find(escaped), std::string::npos) << "the running adapter never showed in /metrics";
  std::string bad;
  EXPECT_TRUE(exposition_parses(metrics, bad)) << bad;
  EXPECT_FALSE(exposition_parses("autoglm_x{a=\"b\"c\"} 1", bad)) << "the check is live";
}

TEST_F(LoraServing, AdaptersLoadAndUnloadAtRunTimeBehindTheKey) {
  const ServerConfig defaults;  // a named one: GCC 12 warns on a temporary passed by value
  start(defaults);
  EXPECT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", adapters[0]}}, false).status, 401);
  EXPECT_EQ(post("/v1/completions", completion("a")).status, 404);
  const auto loaded = post("/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", adapters[0]}});
  ASSERT_EQ(loaded.status, 200) << loaded.body;
  EXPECT_EQ(loaded.body, "Success: LoRA adapter 'a' added successfully.");
  const std::string alone = text_of(post("/v1/completions", completion("a", 300)));
  // Requests running with it while it is unloaded finish with it. The engine is held while the
  // three arrive and the unload is made, so all three are in flight at the unload and none
  // can finish before it, however loaded the machine.
  ASSERT_TRUE(test::wait_until([&] { return api->in_flight() == 0; })) << "the first request never left";
  std::vector<std::thread> clients;
  std::vector<std::string> texts(3);
  bool all_in_flight = false;
  test::HttpResult unloaded;
  {
    test::EngineHold hold(*api);
    for (int i = 0; i < 3; ++i)
      clients.emplace_back([&, i] { texts[size_t(i)] = text_of(post("/v1/completions", completion("a", 300))); });
    all_in_flight = test::wait_until([&] { return api->in_flight() == 3; });
    if (all_in_flight) unloaded = post("/v1/unload_lora_adapter", {{"lora_name", "a"}});
  }  // the engine steps again: the three go on with the adapter
  for (auto& c : clients) c.join();
  ASSERT_TRUE(all_in_flight) << "the three requests were never in flight together (" << api->in_flight() << ")";
  EXPECT_EQ(unloaded.status, 200) << unloaded.body;
  EXPECT_EQ(unloaded.body, "Success: LoRA adapter 'a' removed successfully.");
  for (const std::string& t : texts) EXPECT_EQ(t, alone);
  EXPECT_EQ(post("/v1/completions", completion("a")).status, 404);
  EXPECT_EQ(post("/v1/unload_lora_adapter", {{"lora_name", "a"}}).status, 404);
  struct Case {
    json body;
    std::string param, says;
  };
  for (const Case& c : std::vector<Case>{
           {{{"lora_path", adapters[0]}}, "lora_name", "'lora_name' is required"},
           {{{"lora_name", "stories260K.gguf"}, {"lora_path", adapters[0]}}, "lora_name", "is the name of a model"},
           {{{"lora_name", "x"}, {"lora_path", "/no/such.gguf"}}, "lora_path", "/no/such.gguf"},
           {{{"lora_name", "x"}, {"lora_path", wrong}}, "lora_path", "tensor 'blk.0.ffn_down.weight.lora_b'"},
           {{{"lora_name", "x"}, {"lora_path", adapters[1]}, {"model", "nope"}}, "model", "no model 'nope'"},
       }) {
    const auto r = post("/v1/load_lora_adapter", c.body);
    EXPECT_GE(r.status, 400) << c.body.dump();
    EXPECT_EQ(r.j()["error"]["param"], c.param) << r.body;
    EXPECT_NE(r.j()["error"]["message"].get<std::string>().find(c.says), std::string::npos) << r.body;
  }
  ASSERT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "b"}, {"lora_path", adapters[1]}}).status, 200);
  EXPECT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "b"}, {"lora_path", adapters[1]}}).status, 400);
  EXPECT_EQ(post("/v1/completions", completion("b")).status, 200);
}

TEST(LoraConfig, AdaptersAreReadAndCheckedByName) {
  auto c =
      parse_server_config("lora_adapters: {sql: /a/sql, chat: {path: /a/chat, scale: 0.5}}\nmax_loras: 3\n", "l.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->lora_adapters.size(), 2u);
  EXPECT_EQ(c->runtime.max_loras, 3);
  for (const auto& a : c->lora_adapters) {
    if (a.name == "sql") {
      EXPECT_EQ(a.path, "/a/sql");
    }
    if (a.name == "chat") {
      EXPECT_EQ(a.scale, 0.5f);
    }
  }
  for (const auto& [yaml, says] : std::vector<std::pair<std::string, std::string>>{
           {"lora_adapters: [a]\n", "'lora_adapters' must be a mapping"},
           {"lora_adapters: {a: {scale: 2}}\n", "'lora_adapters.a.path' is required"},
           {"lora_adapters: {a: {path: x, rank: 2}}\n", "'lora_adapters.a.rank' is not a known key"},
           {"max_loras: 0\n", "'max_loras' must be between 1"}}) {
    auto e = parse_server_config(yaml, "l.yaml");
    ASSERT_FALSE(e.is_ok()) << yaml;
    EXPECT_NE(e.status().message().find(says), std::string::npos) << e.status().message();
  }
  ServerConfig bad;
  bad.model = test::shared_path("models/stories260K.gguf");
  bad.runtime.threads = 2;
  bad.lora_adapters = {{"w", "/no/such/adapter.gguf", 1.0f}};
  ApiService api(bad);
  const Status loaded = api.load();
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_NE(loaded.message().find("lora_adapters.w: /no/such/adapter.gguf"), std::string::npos) << loaded.message();
}

}  // namespace
}  // namespace autoglm
