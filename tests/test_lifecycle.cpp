// The server's lifecycle as a load balancer or Kubernetes sees it: /health (liveness) and
// /ready (readiness) while loading, serving and draining; a graceful drain with eight streams
// in flight; past the grace period, streams end with a finish reason, not a cut connection.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "server_test_util.h"

namespace autoglm {
namespace {

using json = nlohmann::json;

class Lifecycle : public test::ServerTest {
 protected:
  // A streamed completion of exactly `tokens` tokens (ignore_eos), with usage in its last chunk.
  test::HttpResult stream(int tokens) {
    const json body = {{"prompt", "Once upon a time"},
                       {"max_tokens", tokens},
                       {"ignore_eos", true},
                       {"stream", true},
                       {"stream_options", {{"include_usage", true}}}};
    return test::http_call(port, "POST", "/v1/completions", body.dump());
  }
  // A server for eight streams of `tokens` each, all in flight and none past its first step:
  // the engine is held (`hold`) until the test resets it. join() the clients.
  void start_eight_streams(int tokens) {
    ServerConfig cfg;
    cfg.runtime.context_window = 4096;
    cfg.runtime.max_running = kStreams;
    start(cfg);
    hold.emplace(*api);
    replies.resize(kStreams);
    for (int i = 0; i < kStreams; ++i) clients.emplace_back([this, i, tokens] { replies[size_t(i)] = stream(tokens); });
    ASSERT_TRUE(test::wait_until([&] { return api->in_flight() >= kStreams; }))
        << "only " << api->in_flight() << " of " << kStreams << " streams ever got in flight";
  }
  void join() {
    hold.reset();  // else the streams wait for the engine forever
    for (auto& c : clients) c.join();
    clients.clear();
  }
  void TearDown() override {
    join();
    test::ServerTest::TearDown();
  }
  static constexpr int kStreams = 8;
  std::vector<test::HttpResult> replies;
  std::vector<std::thread> clients;
  std::optional<test::EngineHold> hold;
};

// What a stream's events say: its finish reason, its completion tokens, whether [DONE] closed it.
struct StreamEnd {
  std::string finish_reason;
  int64_t completion_tokens = -1;
  bool done = false;
};

StreamEnd stream_end(const std::string& sse) {
  StreamEnd end;
  size_t at = 0;
  while ((at = sse.find("data: ", at)) != std::string::npos) {
    const size_t eol = sse.find('\n', at);
    const std::string data = sse.substr(at + 6, eol - at - 6);
    at = eol;
    if (data == "[DONE]") {
      end.done = true;
      continue;
    }
    const json j = json::parse(data, nullptr, false);
    if (j.is_discarded()) continue;
    if (j.contains("usage") && j["usage"].is_object()) end.completion_tokens = j["usage"]["completion_tokens"];
    if (j.contains("choices") && !j["choices"].empty() && j["choices"][0]["finish_reason"].is_string())
      end.finish_reason = j["choices"][0]["finish_reason"];
  }
  return end;
}

TEST(StreamEnd, ReadsTheFinishReasonUsageAndDone) {
  const StreamEnd end = stream_end(
      "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}\n\n"
      "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"completion_tokens\":7}}\n\ndata: [DONE]\n\n");
  EXPECT_EQ(end.finish_reason, "length");
  EXPECT_EQ(end.completion_tokens, 7);
  EXPECT_TRUE(end.done);
  EXPECT_FALSE(stream_end("data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}\n\n").done);
}

// While loading: not alive yet (no engine: a startup probe waits) and not ready. Loaded: both,
// and /health names each engine's thread as alive. Neither needs an API key.
TEST_F(Lifecycle, ProbesWhileLoadingAndServing) {
  ServerConfig cfg;
  cfg.api_keys = {"secret"};
  start(cfg, /*load=*/false);
  EXPECT_EQ(get("/health").status, 503);
  const test::HttpResult loading = get("/ready");
  EXPECT_EQ(loading.status, 503);
  EXPECT_EQ(loading.header("Retry-After"), "1");
  EXPECT_NE(loading.body.find("loading"), std::string::npos) << loading.body;
  ASSERT_TRUE(api->load().is_ok());
  const test::HttpResult health = get("/health");
  ASSERT_EQ(health.status, 200) << health.body;
  const json h = json::parse(health.body);
  EXPECT_EQ(h["status"], "ok");
  ASSERT_EQ(h["engines"].size(), 1u);
  EXPECT_EQ(h["engines"][0]["alive"], true);
  EXPECT_EQ(h["engines"][0]["model"], "stories260K.gguf");
  EXPECT_EQ(get("/ready").status, 200);
  EXPECT_EQ(get("/v1/models").status, 401) << "the API itself still needs the key";
}

// Eight streams in flight at the drain all finish whole (every token, finish_reason "length",
// [DONE]); meanwhile new requests get 503 with Retry-After, /ready is 503 and /health stays 200
// (alive: Kubernetes must not restart a draining pod).
TEST_F(Lifecycle, EightStreamsInFlightAtTheDrainFinishWhole) {
  constexpr int kTokens = 1500;
  start_eight_streams(kTokens);
  // The engine is still held: the streams cannot finish, so the drain lasts while the probes ask.
  std::atomic<bool> drained{false};
  std::thread drain([&] {
    server->drain_and_stop(60);
    drained = true;
  });
  // A completion asked before the drain began would wait for the held engine: ask once /health
  // says the drain is on.
  test::HttpResult refused, ready, health;
  test::wait_until([&] { return (health = get("/health")).body.find("\"draining\"") != std::string::npos; });
  refused = test::http_call(port, "POST", "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})");
  ready = get("/ready");
  const bool answered_while_draining = !drained.load();
  join();
  drain.join();
  ASSERT_TRUE(answered_while_draining) << "the streams ended before the probes were asked";
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(refused.header("Retry-After"), "1");
  EXPECT_EQ(ready.status, 503) << ready.body;
  EXPECT_NE(ready.body.find("shutting down"), std::string::npos) << ready.body;
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(json::parse(health.body, nullptr, false).value("status", ""), "draining") << health.body;
  for (const auto& reply : replies) {
    EXPECT_EQ(reply.status, 200);
    const StreamEnd end = stream_end(reply.body);
    EXPECT_EQ(end.finish_reason, "length");
    EXPECT_EQ(end.completion_tokens, kTokens);
    EXPECT_TRUE(end.done) << "a stream was cut short";
  }
  EXPECT_EQ(api->in_flight(), 0);
}

// Past the grace period the streams still running are cancelled: each ends with a finish
// reason and [DONE], so a client can tell a drained answer from a dropped connection.
TEST_F(Lifecycle, PastTheGraceStreamsEndWithAFinishReason) {
  constexpr int kTokens = 4000;
  start_eight_streams(kTokens);
  hold.reset();  // a slow machine only cancels more of them
  server->drain_and_stop(0.05);
  join();
  int cancelled = 0;
  for (const auto& reply : replies) {
    EXPECT_EQ(reply.status, 200);
    const StreamEnd end = stream_end(reply.body);
    EXPECT_TRUE(end.finish_reason == "cancelled" || end.finish_reason == "length") << end.finish_reason;
    EXPECT_TRUE(end.done) << "a stream was cut without its end";
    if (end.finish_reason == "cancelled") {
      ++cancelled;
      EXPECT_LT(end.completion_tokens, kTokens);
    }
  }
  EXPECT_GT(cancelled, 0) << "every stream finished inside 50 ms: the test no longer tests the grace";
}

// The Model Server Protocol's KV-cache utilisation: a 0..1 gauge that rises while a long
// sequence holds blocks and falls back once it is done.
TEST_F(Lifecycle, KvCacheUsageGaugeFollowsTheBlocksInUse) {
  ServerConfig cfg;
  cfg.runtime.context_window = 4096;
  start(cfg);
  auto usage = [&] { return test::metric_in(get("/metrics").body, "autoglm_kv_cache_usage_perc"); };
  EXPECT_EQ(usage(), 0);
  std::thread client([&] { stream(3000); });
  double seen = 0;
  test::wait_until([&] { return (seen = usage()) > 0; });
  client.join();
  EXPECT_GT(seen, 0) << "the gauge never rose while the stream ran";
  EXPECT_LE(seen, 1);
  // The engine updates its gauges at its next step: the reply may reach the client first.
  double after = -1;
  test::wait_until([&] { return (after = usage()) == 0; });
  EXPECT_EQ(after, 0) << "the gauge never fell back once the stream was done";
}

// Where each model runs and the memory it holds there: the KV pool (and on a GPU the weights).
TEST_F(Lifecycle, DeviceMemoryGaugeNamesTheDeviceAndTheKvPool) {
  ServerConfig cfg;
  cfg.runtime.kv_memory_mib = 8;
  start(cfg);
  const std::string text = get("/metrics").body;
  const double kv = test::metric_in(text, "autoglm_device_memory_bytes{device=\"cpu\",use=\"kv\"}");
  EXPECT_GT(kv, 0);
  EXPECT_LE(kv, 8 << 20);
  EXPECT_EQ(text.find("use=\"weights\""), std::string::npos) << "the cpu reads the mapped file: no copy";
}

}  // namespace
}  // namespace autoglm
