// Async jobs over HTTP on stories260K: accepted with 202, run at low priority to the same
// answer as the synchronous request, listed in pages, cancelled, owned by their key, refused
// with the field named, and resumed after a restart.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "http_test_util.h"
#include "loopback_http_server.h"
#include "server/api.h"
#include "server/http/http_server.h"
#include "server/jobs/hmac.h"
#include "server_test_util.h"
#include "test_util.h"

namespace autoglm {
namespace {

using json = nlohmann::json;
using Headers = std::vector<std::pair<std::string, std::string>>;

// A callback receiver on a loopback port: answers each POST with the next scripted status
// (the last one repeats) and keeps what it got.
class Receiver {
 public:
  struct Got {
    std::string body, job, attempt, signature;
  };
  explicit Receiver(std::vector<int> statuses, uint16_t port = 0)
      : statuses_(std::move(statuses)),
        server_([this](const test::LoopbackHttpServer::Request& req,
                       test::LoopbackHttpServer::Response& res) { answer(req, res); },
                port) {}
  uint16_t port() const { return server_.port(); }
  std::vector<Got> got() {
    std::lock_guard<std::mutex> lock(mutex_);
    return got_;
  }

 private:
  void answer(const test::LoopbackHttpServer::Request& req, test::LoopbackHttpServer::Response& res) {
    std::lock_guard<std::mutex> lock(mutex_);
    got_.push_back({req.body(), std::string(req["X-AutoGLM-Job"]), std::string(req["X-AutoGLM-Attempt"]),
                    std::string(req["X-AutoGLM-Signature"])});
    res.result(boost::beast::http::status(statuses_[std::min(got_.size(), statuses_.size()) - 1]));
    res.body() = "ok";
  }
  std::vector<int> statuses_;
  std::mutex mutex_;
  std::vector<Got> got_;
  test::LoopbackHttpServer server_;  // last: its thread stops before the rest goes
};

class AsyncJobsApi : public ::testing::Test {
 protected:
  void SetUp() override {
    AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
    data_dir = ::testing::TempDir() + "/jobs-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(data_dir);
  }
  void start(int concurrency = 2, std::vector<std::string> keys = {}) {
    ServerConfig cfg = base;
    cfg.model = test::shared_path("models/stories260K.gguf");
    cfg.runtime.threads = 2;
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
  // Polls a job until `settled` holds (bounded: a minute), and gives its last state.
  json poll_job(const std::string& id, const std::function<bool(const json&)>& settled, const Headers& headers = {}) {
    json job;
    test::wait_until([&] { return settled(job = get("/v1/jobs/" + id, headers)); });
    return job;
  }
  // Until the job has ended.
  json wait_for(const std::string& id, const Headers& headers = {}) {
    return poll_job(
        id,
        [](const json& job) {
          const std::string status = job.value("status", "");
          return status == "completed" || status == "failed" || status == "cancelled";
        },
        headers);
  }
  static json with(json base, const json& extra) {
    base.update(extra);
    return base;
  }
  static json chat(const std::string& content, int max_tokens) {
    return {{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", max_tokens}, {"temperature", 0}};
  }
  // Until a job's callback has settled (delivered or failed).
  json wait_for_callback(const std::string& id) {
    return poll_job(id, [](const json& job) {
      const std::string state = job.contains("callback") ? job["callback"].value("state", "") : "";
      return state == "delivered" || state == "failed";
    });
  }
  ServerConfig base;
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
  body["callback_url"] = "http://example.com/hook";  // not in the allowlist (loopback by default)
  const auto refused = post("/v1/async/chat/completions", body);
  EXPECT_EQ(param_of(refused), "callback_url");
  EXPECT_NE(refused.body.find("not in jobs.callback_allowlist"), std::string::npos) << refused.body;
  body["callback_url"] = "https://127.0.0.1/hook";
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

// The engine is held from before the job is accepted until the DELETE has been answered: the
// job's generation is running then and cannot have ended on its own, however fast the model.
TEST_F(AsyncJobsApi, CancellingStopsARunningJob) {
  start();
  std::optional<test::EngineHold> hold(std::in_place, *api);
  const auto accepted =
      post("/v1/async/completions", {{"prompt", "Once"}, {"max_tokens", 450}, {"ignore_eos", true}, {"n", 4}});
  const std::string id = test::string_at(accepted, "/id", 202);
  ASSERT_TRUE(test::wait_until([&] { return api->in_flight() >= 1; })) << "the job's generation never started";
  const auto cancelled = test::http_call(port, "DELETE", "/v1/jobs/" + id);
  hold.reset();
  ASSERT_EQ(cancelled.status, 200) << cancelled.body;
  EXPECT_EQ(test::string_at(cancelled, "/status"), "cancelled");
  const json after = get("/v1/jobs/" + id);
  EXPECT_EQ(after.value("status", ""), "cancelled") << after.dump();
  EXPECT_FALSE(after.contains("result"));
  EXPECT_TRUE(test::wait_until([&] {
    return test::metric_in(test::http_call(port, "GET", "/metrics").body,
                           "autoglm_requests_total{finish_reason=\"cancelled\"}") >= 1;
  })) << "the generation itself never stopped";
}

// Over HTTP: jobs still waiting (or running) at a stop are answered after the next start. That
// a job cut short mid-run is run again is shown without timing in AsyncJobsRunner below.
TEST_F(AsyncJobsApi, JobsLeftByAStopAreRunAgainAtTheNextStart) {
  start(1);
  const json long_job = {{"prompt", "Once"}, {"max_tokens", 400}, {"ignore_eos", true}, {"temperature", 0}};
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(post("/v1/async/completions", long_job).j()["id"]);
  const std::string chat_id = post("/v1/async/chat/completions", chat("Hi", 8)).j()["id"];
  stop();
  start(1);
  for (const std::string& id : ids) {
    const json job = wait_for(id);
    EXPECT_EQ(job["status"], "completed") << job.dump();
    EXPECT_GE(job["attempts"], 1);
    EXPECT_EQ(job["result"]["usage"]["completion_tokens"], 400);
  }
  const json next = wait_for(chat_id);
  EXPECT_EQ(next["status"], "completed");
  EXPECT_TRUE(next["result"]["choices"][0]["message"].contains("content")) << next.dump();
}

// A runner that holds each job until it is stopped: a stop leaves the job in progress, and the
// next start runs it again (a second attempt) to its end.
TEST(AsyncJobsRunner, AJobCutShortByAStopRunsAgainAtTheNextStart) {
  JobsConfig config;
  config.data_dir = ::testing::TempDir() + "/jobs-runner-cut-short";
  std::filesystem::remove_all(config.data_dir);
  config.concurrency = 1;
  struct Gate {
    std::mutex mutex;
    std::condition_variable changed;
    bool started = false, stopped = false;
  };
  auto gate = std::make_shared<Gate>();
  RunJob hold = [gate](const Job&, const std::string&, JobRun& run) {
    run.arm([gate] {
      std::lock_guard<std::mutex> lock(gate->mutex);
      gate->stopped = true;
      gate->changed.notify_all();
    });
    std::unique_lock<std::mutex> lock(gate->mutex);
    gate->started = true;
    gate->changed.notify_all();
    gate->changed.wait(lock, [&] { return gate->stopped; });
    return std::pair<int, std::string>(200, R"({"cut": true})");
  };
  std::string id;
  {
    auto jobs = AsyncJobs::start(config, {}, hold);
    ASSERT_TRUE(jobs.is_ok()) << jobs.status().message();
    (*jobs)->run();
    auto job = (*jobs)->submit("/v1/completions", R"({"prompt": "x"})", "", "", "");
    ASSERT_TRUE(job.is_ok());
    id = job->id;
    std::unique_lock<std::mutex> lock(gate->mutex);
    gate->changed.wait(lock, [&] { return gate->started; });
  }  // the stop: the held job is stopped, not finished
  std::promise<void> ran;
  auto done = ran.get_future();
  RunJob answer = [&ran](const Job&, const std::string&, JobRun&) {
    ran.set_value();
    return std::pair<int, std::string>(200, R"({"answer": 1})");
  };
  auto jobs = AsyncJobs::start(config, {}, answer);
  ASSERT_TRUE(jobs.is_ok());
  (*jobs)->run();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  std::optional<Job> job;
  for (int i = 0; i < 600; ++i) {
    job = (*jobs)->get(id, "");
    if (job && job_finished(job->status)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(job);
  EXPECT_EQ(job->status, JobStatus::kCompleted);
  EXPECT_EQ(job->attempts, 2);
  EXPECT_EQ(job->result, R"({"answer": 1})");
}

TEST_F(AsyncJobsApi, CallbacksAreSignedAndDeliveredOnce) {
  Receiver receiver({200});
  base.jobs.callback_secret = "s3cret";
  start();
  json body = chat("Hi", 6);
  body["callback_url"] = "http://127.0.0.1:" + std::to_string(receiver.port()) + "/hook";
  body["metadata"] = {{"ticket", "42"}};
  const std::string id = post("/v1/async/chat/completions", body).j()["id"];
  const json job = wait_for_callback(id);
  EXPECT_EQ(job["callback"]["state"], "delivered") << job.dump();
  ASSERT_EQ(job["callback"]["attempts"].size(), 1u);
  EXPECT_EQ(job["callback"]["attempts"][0]["http_status"], 200);
  const auto got = receiver.got();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].job, id);
  EXPECT_EQ(got[0].attempt, "1");
  EXPECT_EQ(got[0].signature, "sha256=" + hmac_sha256_hex("s3cret", got[0].body));
  const json sent = json::parse(got[0].body);
  EXPECT_EQ(sent["id"], id);
  EXPECT_EQ(sent["status"], "completed");
  EXPECT_EQ(sent["metadata"]["ticket"], "42");
  EXPECT_EQ(sent["result"]["choices"][0]["message"]["content"], job["result"]["choices"][0]["message"]["content"]);
}

TEST_F(AsyncJobsApi, AFailingReceiverGetsABoundedNumberOfAttemptsAllRecorded) {
  Receiver receiver({500});
  base.jobs.callback_attempts = 3;
  base.jobs.callback_backoff_s = 0.02;
  start();
  json body = chat("Hi", 2);
  body["callback_url"] = "http://127.0.0.1:" + std::to_string(receiver.port()) + "/hook";
  const std::string id = post("/v1/async/chat/completions", body).j()["id"];
  const json job = wait_for_callback(id);
  EXPECT_EQ(job["callback"]["state"], "failed") << job.dump();
  ASSERT_EQ(job["callback"]["attempts"].size(), 3u);
  for (const json& a : job["callback"]["attempts"]) {
    EXPECT_EQ(a["http_status"], 500);
    EXPECT_NE(a["error"].get<std::string>().find("answered 500"), std::string::npos);
  }
  const auto got = receiver.got();
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].job, id);  // the same job id every time: the receiver can de-duplicate
    EXPECT_EQ(got[i].attempt, std::to_string(i + 1));
    EXPECT_EQ(got[i].body, got[0].body);
    EXPECT_EQ(got[i].signature, "");  // no secret configured: no signature
  }
  EXPECT_EQ(test::metric_in(test::http_call(port, "GET", "/metrics").body,
                            "autoglm_job_callback_attempts_total{outcome=\"failed\"}"),
            3);
}

TEST_F(AsyncJobsApi, AReceiverThatWasDownGetsItAfterARestart) {
  uint16_t free_port;
  {
    Receiver probe({200});
    free_port = probe.port();
  }                                  // nothing listens there now
  base.jobs.callback_backoff_s = 2;  // the retry comes 1-2 s after the first attempt: after the restart
  start();
  json body = chat("Hi", 2);
  body["callback_url"] = "http://127.0.0.1:" + std::to_string(free_port) + "/hook";
  const std::string id = post("/v1/async/chat/completions", body).j()["id"];
  json job;
  for (int i = 0; i < 600; ++i) {
    job = get("/v1/jobs/" + id);
    if (job.contains("callback") && !job["callback"]["attempts"].empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(job["callback"]["attempts"].size(), 1u) << job.dump();
  EXPECT_TRUE(job["callback"]["attempts"][0]["http_status"].is_null());  // connection refused
  EXPECT_EQ(job["callback"]["state"], "pending");
  stop();
  Receiver receiver({200}, free_port);
  start();  // the pending callback is read back and sent when due
  const json after = wait_for_callback(id);
  EXPECT_EQ(after["callback"]["state"], "delivered") << after.dump();
  // Only the restarted server could deliver it (nothing listened before). Normally that is the
  // second attempt; a machine stalled past the backoff before the stop made more (all refused).
  const json& attempts = after["callback"]["attempts"];
  ASSERT_GE(attempts.size(), 2u) << after.dump();
  for (size_t i = 0; i + 1 < attempts.size(); ++i) EXPECT_TRUE(attempts[i]["http_status"].is_null()) << after.dump();
  EXPECT_EQ(attempts.back()["http_status"], 200) << after.dump();
  ASSERT_EQ(receiver.got().size(), 1u);
  EXPECT_EQ(receiver.got()[0].attempt, std::to_string(attempts.size()));
}

TEST(AsyncJobsOff, WithoutADataDirTheRoutesSaySo) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  ServerConfig cfg;
  cfg.model = test::shared_path("models/stories260K.gguf");
  cfg.runtime.threads = 2;
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
