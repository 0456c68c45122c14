// A server on a free loopback port over stories260K, for the tests of its HTTP surface.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "http_test_util.h"
#include "server/api.h"
#include "server/http/http_server.h"
#include "test_util.h"

namespace autoglm::test {

// Keeps every engine of a loaded ApiService from stepping while it lives: it holds a turn of
// the thread pool they step on. Requests submitted meanwhile wait in the engine and none can
// finish, so a test orders "while they run" by state, not by a sleep. (Hold it only while
// the test needs no generation to progress.)
class EngineHold {
 public:
  explicit EngineHold(ApiService& api) : hold_(api.default_runtime().hold_steps()) {}

 private:
  std::shared_ptr<void> hold_;
};

class ServerTest : public ::testing::Test {
 protected:
  // `load` false: the server answers while the model is not loaded yet (api->load() later).
  // Without a model in `cfg` (nor a models_dir), stories260K.
  void start(ServerConfig cfg, bool load = true) {
    AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
    const Status started = try_start(std::move(cfg), load);
    ASSERT_TRUE(started.is_ok()) << started.message();
  }
  // The same, for a test whose server is meant to fail: the error of listening or loading.
  Status try_start(ServerConfig cfg, bool load = true) {
    if (cfg.model.empty() && cfg.models_dir.empty()) cfg.model = shared_path("models/stories260K.gguf");
    cfg.runtime.threads = 2;
    server.reset();  // a restart: the old transport goes before the service it calls
    api = std::make_unique<ApiService>(cfg);
    server = std::make_unique<HttpServer>(*api, 2);
    if (Status st = server->start("127.0.0.1", 0); !st.is_ok()) return st;
    port = server->port();
    api->set_listening_address("127.0.0.1", port);  // as Server::start does
    return load ? api->load() : Status::ok();
  }
  void TearDown() override {
    if (server) server->stop();
  }
  HttpResult get(const std::string& path, const std::string& key = "") {
    if (key.empty()) return http_call(port, "GET", path);
    return http_call(port, "GET", path, "", {{"Authorization", "Bearer " + key}});
  }
  std::unique_ptr<ApiService> api;
  std::unique_ptr<HttpServer> server;
  int port = 0;
};

}  // namespace autoglm::test
