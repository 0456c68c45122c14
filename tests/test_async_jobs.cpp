// Async jobs over HTTP on stories260K: accepted with 202, run at low priority to the same
// answer as the synchronous request, listed in pages, cancelled, owned by their key, refused
// with the field named, and resumed after a restart.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "http_test_util.h"
#include "server/api.h"
#include "server/http_server.h"
#include "test_util.h"

namespace autoglm {
namespace {

using json = nlohmann::json;
using Headers = std::vector<std::pair<std::string, std::string>>;

class AsyncJobsApi : public ::testing::Test {
 protected:
  void SetUp() override {
    AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
    data_dir = ::testing::TempDir() + "/jobs-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(data_dir);
  }
  void start(int concurrency = 2, std::vector<std::string> keys = {}) {
    ServerConfig cfg;
    cfg.model = test::shared_path("models/stories260K.gguf");
    cfg.threads = 2;
    cfg.jobs.data_dir = data_dir;
    cfg.jobs.concurrency = concurrency;
    cfg.api_keys = keys;
    api = std::make_unique<ApiService>(cfg);
    server = std::make_unique<HttpServer>(*api, 2);
    ASSERT_TRUE(server->start("127.0.0.1", 0).is_ok());
    port = server->port();
    const Status loaded = api->load();
    ASSERT_TRUE(loaded.is_ok()) << loaded.message();
  }
  void stop() {
    server->stop();
    server.reset();
    api.reset();
  }
  void TearDown() override {
    if (server) stop();
  }
  test::HttpResult post(const std::string& path, const json& body, const Headers& headers = {}) {
    return test::http_call(port, "POST", path, body.dump(), headers);
  }
  json get(const std::string& path, const Headers& headers = {}) {
    return test::http_call(port, "GET", path, "", headers).j();
  }
  // Polls a job until it has ended (or a minute passed).
  json wait_for(const std::string& id, const Headers& headers = {}) {
    json job;
    for (int i = 0; i < 1200; ++i) {
      job = get("/v1/jobs/" + id, headers);
      const std::string status = job.value("status", "");
      if (status == "completed" || status == "failed" || status == "cancelled") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return job;
  }
  static json with(json base, const json& extra) {
    base.update(extra);
    return base;
  }
  static json chat(const std::string& content, int max_tokens) {
    return {{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", max_tokens}, {"temperature", 0}};
  }
  std::string data_dir;
  std::unique_ptr<ApiService> api;
  std::unique_ptr<HttpServer> server;
  int port = 0;
};

TEST_F(AsyncJobsApi, AJobAnswersAsTheSynchronousRequestDoes) {
  start();
  json body = chat("Tell me a story", 16);
  const auto sync = post("/v1/chat/completions", body);
  ASSERT_EQ(sync.status, 200);
  body["metadata"] = {{"batch", "nightly"}};
  const auto accepted = post("/v1/async/chat/completions", body);
  ASSERT_EQ(accepted.status, 202) << accepted.body;
  const json job = accepted.j();
  EXPECT_EQ(job["object"], "job");
  EXPECT_EQ(job["endpoint"], "/v1/chat/completions");
  EXPECT_EQ(job["status_url"], "/v1/jobs/" + job["id"].get<std::string>());
  const json done = wait_for(job["id"]);
  ASSERT_EQ(done["status"], "completed") << done.dump();
  EXPECT_EQ(done["http_status"], 200);
  EXPECT_EQ(done["metadata"]["batch"], "nightly");
  EXPECT_EQ(done["attempts"], 1);
  EXPECT_EQ(done["result"]["choices"][0]["message"]["content"], sync.j()["choices"][0]["message"]["content"]);
  EXPECT_EQ(done["result"]["usage"]["prompt_tokens"], sync.j()["usage"]["prompt_tokens"]);
  EXPECT_EQ(done["result"]["usage"]["completion_tokens"], sync.j()["usage"]["completion_tokens"]);
  const auto completion = post("/v1/async/completions", {{"prompt", "Once upon"}, {"max_tokens", 4}});
  ASSERT_EQ(completion.status, 202);
  EXPECT_EQ(wait_for(completion.j()["id"])["result"]["object"], "text_completion");
  EXPECT_EQ(test::metric_in(test::http_call(port, "GET", "/metrics").body, "autoglm_jobs{status=\"completed\"}"), 2);
}

TEST_F(AsyncJobsApi, BadJobsAreRefusedNamingTheField) {
  start();
  auto param_of = [&](const test::HttpResult& r) { return r.j()["error"]["param"]; };
  json body = chat("Hi", 4);
  body["callback_url"] = "http://127.0.0.1:9/hook";
  EXPECT_EQ(param_of(post("/v1/async/chat/completions", body)), "callback_url");
  EXPECT_EQ(param_of(post("/v1/async/chat/completions", with(chat("Hi", 4), {{"stream", true}}))), "stream");
  EXPECT_EQ(param_of(post("/v1/async/chat/completions", with(chat("Hi", 4), {{"metadata", {{"k", 1}}}}))), "metadata");
  EXPECT_EQ(param_of(post("/v1/async/chat/completions", with(chat("Hi", 4), {{"temperature", -1}}))), "temperature");
  EXPECT_EQ(post("/v1/async/chat/completions", with(chat("Hi", 4), {{"model", "gpt-4"}})).status, 404);
  EXPECT_EQ(param_of(post("/v1/async/tasks", json::object())), "input");
  EXPECT_EQ(test::http_call(port, "GET", "/v1/jobs?limit=0").j()["error"]["param"], "limit");
  EXPECT_EQ(test::http_call(port, "GET", "/v1/jobs?status=done").j()["error"]["param"], "status");
  EXPECT_EQ(test::http_call(port, "GET", "/v1/jobs/job_nope").status, 404);
  EXPECT_EQ(get("/v1/jobs")["data"].size(), 0u);  // nothing refused was stored
}

TEST_F(AsyncJobsApi, JobsArePagedNewestFirstAndSeenOnlyByTheirKey) {
  start(2, {"sk-one", "sk-two"});
  const Headers one = {{"Authorization", "Bearer sk-one"}}, two = {{"Authorization", "Bearer sk-two"}};
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(post("/v1/async/completions", {{"prompt", "Once"}, {"max_tokens", 2}}, one).j()["id"]);
  for (const std::string& id : ids) EXPECT_EQ(wait_for(id, one)["status"], "completed");
  const json first = get("/v1/jobs?limit=2", one);
  ASSERT_EQ(first["data"].size(), 2u);
  EXPECT_EQ(first["data"][0]["id"], ids[2]);
  EXPECT_TRUE(first["has_more"]);
  const json rest = get("/v1/jobs?limit=2&after=" + first["last_id"].get<std::string>(), one);
  ASSERT_EQ(rest["data"].size(), 1u);
  EXPECT_EQ(rest["data"][0]["id"], ids[0]);
  EXPECT_FALSE(rest["has_more"]);
  EXPECT_EQ(get("/v1/jobs?status=completed", one)["data"].size(), 3u);
  EXPECT_EQ(get("/v1/jobs?status=queued", one)["data"].size(), 0u);
  EXPECT_EQ(get("/v1/jobs", two)["data"].size(), 0u);
  EXPECT_EQ(test::http_call(port, "GET", "/v1/jobs/" + ids[0], "", two).status, 404);
  EXPECT_EQ(test::http_call(port, "DELETE", "/v1/jobs/" + ids[0], "", two).status, 404);
  EXPECT_EQ(test::http_call(port, "GET", "/v1/jobs").status, 401);
}

TEST_F(AsyncJobsApi, CancellingStopsARunningJob) {
  start();
  const auto accepted = post("/v1/async/completions", {{"prompt", "Once"}, {"max_tokens", 450}, {"ignore_eos", true}});
  const std::string id = accepted.j()["id"];
  for (int i = 0; i < 400 && get("/v1/jobs/" + id)["status"] != "in_progress"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto cancelled = test::http_call(port, "DELETE", "/v1/jobs/" + id);
  ASSERT_EQ(cancelled.status, 200);
  EXPECT_EQ(cancelled.j()["status"], "cancelled");
  for (int i = 0; i < 200 && test::metric_in(test::http_call(port, "GET", "/metrics").body,
                                             "autoglm_requests_total{finish_reason=\"cancelled\"}") < 1;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(test::metric_in(test::http_call(port, "GET", "/metrics").body,
                            "autoglm_requests_total{finish_reason=\"cancelled\"}"),
            1);  // the generation itself stopped
  const json after = get("/v1/jobs/" + id);
  EXPECT_EQ(after["status"], "cancelled");
  EXPECT_FALSE(after.contains("result"));
}

TEST_F(AsyncJobsApi, JobsLeftByAStopAreRunAgainAtTheNextStart) {
  start(1);
  const json long_job = {{"prompt", "Once"}, {"max_tokens", 400}, {"ignore_eos", true}, {"temperature", 0}};
  const std::string running = post("/v1/async/completions", long_job).j()["id"];
  const std::string queued = post("/v1/async/chat/completions", chat("Hi", 8)).j()["id"];
  for (int i = 0; i < 400 && get("/v1/jobs/" + running)["status"] != "in_progress"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(get("/v1/jobs/" + running)["status"], "in_progress");
  stop();  // the running job is cut short, the queued one never started
  start(1);
  const json resumed = wait_for(running), next = wait_for(queued);
  EXPECT_EQ(resumed["status"], "completed") << resumed.dump();
  EXPECT_EQ(resumed["attempts"], 2);
  EXPECT_EQ(resumed["result"]["usage"]["completion_tokens"], 400);
  EXPECT_EQ(next["status"], "completed");
  EXPECT_EQ(next["attempts"], 1);
}

TEST(AsyncJobsOff, WithoutADataDirTheRoutesSaySo) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  ServerConfig cfg;
  cfg.model = test::shared_path("models/stories260K.gguf");
  cfg.threads = 2;
  ApiService api(cfg);
  ASSERT_TRUE(api.load().is_ok());
  HttpRequest req;
  req.method = "POST";
  req.target = "/v1/async/completions";
  req.body = R"({"prompt": "x"})";
  const Reply r = api.handle(req);
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("jobs.data_dir"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace autoglm
