// A server over a folder of models (models_dir): each file or folder a model, listed with its
// status, loaded on the first request (or POST /models/load), unloaded on request once its
// requests in flight are done, the least recently used idle one unloaded past models_max, asleep
// after sleep_idle_seconds and awake on the next request; a model that fails to load answers
// with the reason and harms no other.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "server_test_util.h"

namespace autoglm {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kStories = "a-stories.gguf";  // first by name: the default model
constexpr const char* kRandom = "b-random.gguf";
constexpr const char* kQwen = "qwen2-tiny";
constexpr const char* kBroken = "broken.gguf";

class ModelShelfServer : public test::ServerTest {
 protected:
  void SetUp() override {
    AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
    AUTOGLM_REQUIRE_SHARED("models/llama-2-tiny-random.gguf");
    AUTOGLM_REQUIRE_SHARED("models/hf/qwen2-tiny/config.json");
    dir = test::temp_path("models_dir_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::create_symlink(test::shared_path("models/stories260K.gguf"), fs::path(dir) / kStories);
    fs::create_symlink(test::shared_path("models/llama-2-tiny-random.gguf"), fs::path(dir) / kRandom);
    fs::create_directory_symlink(test::shared_path("models/hf/qwen2-tiny"), fs::path(dir) / kQwen);
    std::ofstream(fs::path(dir) / kBroken) << "GGUF but not really";
    std::ofstream(fs::path(dir) / "mmproj-vision.gguf") << "a projector is no model of its own";
    std::ofstream(fs::path(dir) / "notes.txt") << "not a model";
  }
  void TearDown() override {
    test::ServerTest::TearDown();
    server.reset();
    api.reset();
    fs::remove_all(dir);
  }
  void start(const std::string& extra = "") {
    auto config = parse_server_config(
        "context_window: 256\nkv_cache: {memory_mib: 16}\nmodels_dir: " + dir + "\n" + extra, "shelf.yaml");
    ASSERT_TRUE(config.is_ok()) << config.status().message();
    test::ServerTest::start(*config);
  }
  test::HttpResult chat(const std::string& model, int max_tokens = 4, bool stream = false) {
    const json body = {{"model", model},
                       {"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                       {"max_tokens", max_tokens},
                       {"temperature", 0},
                       {"stream", stream}};
    return test::http_call(port, "POST", "/v1/chat/completions", body.dump());
  }
  json status_of(const std::string& model) {
    const json list = test::http_call(port, "GET", "/v1/models").j();
    for (const json& m : list["data"])
      if (m["id"] == model) return m["status"];
    return json();
  }
  std::string status_value(const std::string& model) {
    const json s = status_of(model);
    return s.is_object() ? s["value"].get<std::string>() : "(absent)";
  }
  bool wait_for_status(const std::string& model, const std::string& value) {
    return test::wait_until([&] { return status_value(model) == value; });
  }
  test::HttpResult post_model(const std::string& route, const std::string& model) {
    return test::http_call(port, "POST", route, json{{"model", model}}.dump());
  }
  double metric(const std::string& selector) {
    return test::metric_in(test::http_call(port, "GET", "/metrics").body, selector);
  }

  std::string dir;
};

TEST_F(ModelShelfServer, ListsEveryModelUnloadedAndLoadsOnFirstRequest) {
  start();
  const json list = test::http_call(port, "GET", "/v1/models").j();
  std::set<std::string> ids;
  for (const json& m : list["data"]) {
    ids.insert(m["id"].get<std::string>());
    EXPECT_EQ(m["status"]["value"], "unloaded") << m.dump();
  }
  EXPECT_EQ(ids, (std::set<std::string>{kStories, kRandom, kQwen, kBroken}));  // no projector, no text file
  EXPECT_EQ(test::http_call(port, "GET", "/ready").status, 200);               // nothing loaded, yet ready to load

  const auto first = chat(kRandom);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.j()["model"], kRandom);
  EXPECT_EQ(status_value(kRandom), "loaded");
  EXPECT_EQ(status_value(kStories), "unloaded");  // only what was asked for
  EXPECT_EQ(metric(std::string("autoglm_model_loads_total{model=\"") + kRandom + "\",result=\"ok\"}"), 1);
  EXPECT_EQ(metric(std::string("autoglm_model_status{model=\"") + kRandom + "\",status=\"loaded\"}"), 1);
  EXPECT_EQ(metric(std::string("autoglm_model_status{model=\"") + kStories + "\",status=\"unloaded\"}"), 1);
  EXPECT_GT(metric("process_resident_memory_bytes"), 0);

  const auto again = chat(kRandom);  // loaded: no second load
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(metric(std::string("autoglm_model_loads_total{model=\"") + kRandom + "\",result=\"ok\"}"), 1);
  // /tokenize and a Hugging Face folder load the same way.
  const auto tokens = test::http_call(port, "POST", "/tokenize", json{{"model", kQwen}, {"content", "hi"}}.dump());
  ASSERT_EQ(tokens.status, 200) << tokens.body;
  EXPECT_FALSE(tokens.j()["tokens"].empty());
  EXPECT_EQ(status_value(kQwen), "loaded");
}

TEST_F(ModelShelfServer, AModelThatFailsToLoadAnswersWithTheReasonAndHarmsNoOther) {
  start();
  const auto failed = chat(kBroken);
  EXPECT_EQ(failed.status, 503) << failed.body;
  const std::string message = failed.j()["error"]["message"];
  EXPECT_NE(message.find("'broken.gguf' failed to load"), std::string::npos) << message;
  const json status = status_of(kBroken);
  EXPECT_EQ(status["value"], "failed");
  EXPECT_TRUE(status["failed"].get<bool>());
  EXPECT_FALSE(status["reason"].get<std::string>().empty());
  EXPECT_NE(message.find(status["reason"].get<std::string>()), std::string::npos) << message;
  EXPECT_EQ(metric(std::string("autoglm_model_loads_total{model=\"") + kBroken + "\",result=\"failed\"}"), 1);
  // Asked again, it answers the same without loading again; the others serve.
  EXPECT_EQ(chat(kBroken).status, 503);
  EXPECT_EQ(metric(std::string("autoglm_model_loads_total{model=\"") + kBroken + "\",result=\"failed\"}"), 1);
  const auto other = chat(kStories);
  EXPECT_EQ(other.status, 200) << other.body;
  EXPECT_EQ(test::http_call(port, "GET", "/health").status, 200);
  // POST /models/load tries again (and fails again, with its reason).
  ASSERT_EQ(post_model("/models/load", kBroken).status, 200);
  ASSERT_TRUE(test::wait_until([&] {
    return metric(std::string("autoglm_model_loads_total{model=\"") + kBroken + "\",result=\"failed\"}") == 2;
  })) << "the second load never failed";
  EXPECT_EQ(status_value(kBroken), "failed");
}

TEST_F(ModelShelfServer, WithoutAutoloadAModelLoadsOnlyByRequestAndUnloadsByRequest) {
  start("models_autoload: false\n");
  const auto refused = chat(kStories);
  EXPECT_EQ(refused.status, 404) << refused.body;
  EXPECT_NE(refused.body.find("POST /models/load"), std::string::npos) << refused.body;
  EXPECT_EQ(status_value(kStories), "unloaded");

  const auto load = post_model("/models/load", kStories);
  ASSERT_EQ(load.status, 200) << load.body;
  EXPECT_TRUE(load.j()["success"].get<bool>());
  ASSERT_TRUE(wait_for_status(kStories, "loaded")) << status_of(kStories).dump();
  EXPECT_EQ(chat(kStories).status, 200);

  const auto unload = post_model("/models/unload", kStories);
  ASSERT_EQ(unload.status, 200) << unload.body;
  ASSERT_TRUE(wait_for_status(kStories, "unloaded")) << status_of(kStories).dump();
  EXPECT_EQ(chat(kStories).status, 404);
  EXPECT_EQ(metric(std::string("autoglm_model_unloads_total{model=\"") + kStories + "\",reason=\"request\"}"), 1);

  const auto twice = post_model("/models/unload", kStories);
  EXPECT_EQ(twice.status, 400) << twice.body;
  EXPECT_NE(twice.body.find("is not loaded"), std::string::npos) << twice.body;
  const auto unknown = post_model("/models/load", "gpt-4");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_NE(unknown.body.find("a-stories.gguf"), std::string::npos) << unknown.body;  // names those served
  EXPECT_EQ(test::http_call(port, "POST", "/models/load", "{}").status, 400);
}

TEST_F(ModelShelfServer, PastModelsMaxTheLeastRecentlyUsedIdleModelUnloads) {
  start("models_max: 2\n");
  ASSERT_EQ(chat(kStories).status, 200);
  ASSERT_EQ(chat(kRandom).status, 200);
  ASSERT_EQ(chat(kQwen).status, 200);  // a third: the least recently used (stories) makes room
  EXPECT_EQ(status_value(kStories), "unloaded");
  EXPECT_EQ(status_value(kRandom), "loaded");
  EXPECT_EQ(status_value(kQwen), "loaded");
  EXPECT_EQ(metric(std::string("autoglm_model_unloads_total{model=\"") + kStories + "\",reason=\"lru\"}"), 1);

  ASSERT_EQ(chat(kRandom).status, 200);   // now qwen is the least recently used
  ASSERT_EQ(chat(kStories).status, 200);  // loads again, in qwen's place
  EXPECT_EQ(status_value(kQwen), "unloaded");
  EXPECT_EQ(status_value(kRandom), "loaded");
  EXPECT_EQ(status_value(kStories), "loaded");
  EXPECT_EQ(metric(std::string("autoglm_model_loads_total{model=\"") + kStories + "\",result=\"ok\"}"), 2);
}

// Two requests at once for two models past models_max: neither model is unloaded while a request
// waits for it (they would take turns for ever), so both are served; the extra one unloads after.
TEST_F(ModelShelfServer, RequestsForTwoModelsAtOncePastModelsMaxAreBothServed) {
  start("models_max: 1\n");
  test::HttpResult first, second;
  std::thread a([&] { first = chat(kStories); });
  std::thread b([&] { second = chat(kRandom); });
  a.join();
  b.join();
  EXPECT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(second.status, 200) << second.body;
  const auto loaded = [&] { return int(status_value(kStories) == "loaded") + int(status_value(kRandom) == "loaded"); };
  EXPECT_TRUE(test::wait_until([&] { return loaded() == 1; })) << "still loaded: " << loaded();
}

TEST_F(ModelShelfServer, AnUnloadWaitsForTheRequestsInFlight) {
  start();
  ASSERT_EQ(chat(kStories).status, 200);
  ASSERT_TRUE(test::wait_until([&] { return status_of(kStories)["in_use"] == 0; }))
      << "the first request's hold never ended: " << status_of(kStories).dump();
  test::HttpResult streamed;
  {
    auto still = api->default_runtime().hold_steps();  // the stories engine waits between steps
    std::thread client([&] { streamed = chat(kStories, 24, true); });
    ASSERT_TRUE(test::wait_until([&] { return status_of(kStories)["in_use"] == 1; }))
        << "the request never held its model: " << status_of(kStories).dump();
    const auto unload = post_model("/models/unload", kStories);
    ASSERT_EQ(unload.status, 200) << unload.body;
    const json during = status_of(kStories);
    EXPECT_EQ(during["value"], "loaded") << during.dump();  // until the request is done
    EXPECT_TRUE(during["unloading"].get<bool>()) << during.dump();
    // The pending unload holds up no other model's load.
    const auto other = chat(kRandom);
    EXPECT_EQ(other.status, 200) << other.body;
    EXPECT_EQ(status_value(kStories), "loaded");
    still.reset();
    client.join();
  }
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_NE(streamed.body.find("\"finish_reason\":\"length\""), std::string::npos) << streamed.body;
  EXPECT_NE(streamed.body.find("data: [DONE]"), std::string::npos) << streamed.body;
  ASSERT_TRUE(wait_for_status(kStories, "unloaded")) << status_of(kStories).dump();
  EXPECT_EQ(chat(kStories).status, 200);  // and loads again when asked for
}

TEST_F(ModelShelfServer, AnIdleModelSleepsAndWakesOnTheNextRequest) {
  start("sleep_idle_seconds: 0.2\n");
  const auto first = chat(kStories);
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_TRUE(wait_for_status(kStories, "sleeping")) << status_of(kStories).dump();
  EXPECT_EQ(metric(std::string("autoglm_model_unloads_total{model=\"") + kStories + "\",reason=\"idle\"}"), 1);
  EXPECT_EQ(metric(std::string("autoglm_model_status{model=\"") + kStories + "\",status=\"sleeping\"}"), 1);
  EXPECT_EQ(test::http_call(port, "GET", "/ready").status, 200);  // asleep is still ready
  const auto woke = chat(kStories);
  ASSERT_EQ(woke.status, 200) << woke.body;
  EXPECT_EQ(woke.j()["choices"][0]["message"]["content"], first.j()["choices"][0]["message"]["content"]);
  EXPECT_EQ(metric(std::string("autoglm_model_loads_total{model=\"") + kStories + "\",result=\"ok\"}"), 2);
}

TEST(ModelsDir, NamesFilesFoldersAndShardsAsLlamaServerDoes) {
  const fs::path dir = test::temp_path("models_dir_scan");
  fs::remove_all(dir);
  fs::create_directories(dir / "vlm");
  fs::create_directories(dir / "split");
  fs::create_directories(dir / "hf");
  fs::create_directories(dir / ".hidden");
  for (const fs::path& p :
       {dir / "one.gguf", dir / "big-00001-of-00002.gguf", dir / "big-00002-of-00002.gguf", dir / "mmproj-one.gguf",
        dir / "vlm" / "model.gguf", dir / "vlm" / "mmproj-model-f16.gguf", dir / "split" / "x.gguf",
        dir / "split" / "y.gguf", dir / "hf" / "config.json", dir / ".hidden" / "z.gguf", dir / "readme.md"})
    std::ofstream(p) << "x";
  const ServerConfig top;
  auto found = scan_models_dir(dir.string(), top);
  ASSERT_TRUE(found.is_ok()) << found.status().message();
  std::vector<std::string> names, paths;
  for (const ServedModel& m : *found) {
    // A folder's projector is its model's; one at the top is no other model's.
    EXPECT_EQ(m.config->runtime.mmproj, m.name == "vlm" || m.name == "hf" ? "" : "none") << m.name;
    names.push_back(m.name);
    paths.push_back(fs::path(m.config->model).lexically_relative(dir).string());
    EXPECT_TRUE(m.on_demand);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"big-00001-of-00002.gguf", "hf", "one.gguf", "split/x.gguf",
                                             "split/y.gguf", "vlm"}));
  EXPECT_EQ(paths, (std::vector<std::string>{"big-00001-of-00002.gguf", "hf", "one.gguf", "split/x.gguf",
                                             "split/y.gguf", "vlm/model.gguf"}));
  EXPECT_EQ(scan_models_dir((dir / "nowhere").string(), top).status().code(), StatusCode::kInvalidArgument);
  // In a configuration: a name of `models:` keeps its entry; a missing folder names the key.
  auto config = parse_server_config("models_dir: " + dir.string() + "\n", "c.yaml");
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  EXPECT_EQ(served_model_names(*config).size(), 6u);
  EXPECT_EQ(models_max_of(*config), 4);
  auto missing = parse_server_config("models_dir: /nonexistent/models\n", "c.yaml");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("models_dir: '/nonexistent/models' is not a folder"), std::string::npos)
      << missing.status().message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace autoglm
