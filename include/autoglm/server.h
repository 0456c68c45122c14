// The OpenAI-compatible server as a library: what `autoglm serve` runs, for a program (or a
// binding) that serves in-process.
//
//   autoglm::ServerOptions o;
//   o.config_path = "config/default.yaml";
//   o.overrides = {{"model", "\"model.gguf\""}, {"port", "0"}};
//   auto server = autoglm::Server::start(o);   // listening and loaded when it returns
//   ... (*server)->port() ...
//   (*server)->stop();                          // drains, then stops the engine
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autoglm/runtime.h"
#include "autoglm/status.h"

namespace autoglm {

struct ServerOptions {
  std::string config_path;  // YAML configuration ("": the defaults)
  // Keys set on top of it: dotted paths ("port", "kv_cache.dtype", "speculative.method") and
  // YAML or JSON values ("8080", "\"q8_0\"", "{\"method\": \"ngram\"}").
  std::vector<std::pair<std::string, std::string>> overrides;
  std::vector<std::string> api_keys;  // accepted on top of the configuration's api_keys
  RuntimeOptions base;                // what the configuration does not carry (repacking, pinning, load progress, log)
  // Called once the port is bound, before the model loads (a long step for a large model).
  std::function<void(const std::string& host, int port)> on_listening;
};

class Server {
 public:
  // Reads the configuration, binds, loads the model and starts serving. Errors name the
  // configuration key or the file.
  static Result<std::unique_ptr<Server>> start(const ServerOptions& options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  const std::string& host() const;
  int port() const;
  const std::string& model_path() const;  // the first model's
  // Reads the configuration again (the same file and overrides) and applies its `routes:`
  // (weights, rules, thresholds); requests in flight finish on the routes they started with.
  // The models cannot change without a restart: an error says so, and the routes stay.
  Status reload();
  double shutdown_grace_seconds() const;
  // Stops accepting, lets requests in flight finish for the configured grace period (the rest
  // are cancelled), then stops the tasks and the engine. Idempotent.
  void stop();

  struct Parts;

 private:
  Server();
  std::unique_ptr<Parts> parts_;
};

}  // namespace autoglm
