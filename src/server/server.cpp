#include "autoglm/server.h"

#include <mutex>

#include "server/api.h"
#include "server/config/config.h"
#include "server/http/http_server.h"

namespace autoglm {

namespace {
constexpr int kIoThreads = 2;  // connections are cheap: generation runs on the engine thread
}  // namespace

struct Server::Parts {
  ServerOptions options;  // for reload
  ServerConfig config;
  std::string first_model_path;
  std::unique_ptr<ApiService> api;
  std::unique_ptr<HttpServer> http;
  std::once_flag stopped;
};

Server::Server() : parts_(std::make_unique<Parts>()) {}

Server::~Server() {
  stop();
}

Result<std::unique_ptr<Server>> Server::start(const ServerOptions& options) {
  std::unique_ptr<Server> server(new Server());
  Parts& p = *server->parts_;
  p.options = options;
  AUTOGLM_ASSIGN_OR_RETURN(p.config, load_server_config(options.config_path, options.overrides));
  for (const std::string& key : options.api_keys) p.config.api_keys.push_back(key);
  if (served_models(p.config).empty())
    return invalid_argument(p.config.models_dir.empty()
                                ? "model: no model given (the 'model' key, 'models', 'models_dir', -m/--model or "
                                  "--models-dir)"
                                : "models_dir: '" + p.config.models_dir + "' holds no model (GGUF files or folders)");
  p.first_model_path = served_models(p.config).front().config->model;
  p.api = std::make_unique<ApiService>(p.config);
  p.http = std::make_unique<HttpServer>(*p.api, kIoThreads);
  AUTOGLM_RETURN_IF_ERROR(p.http->start(p.config.host, p.config.port));
  if (options.on_listening) options.on_listening(p.config.host, p.http->port());
  p.api->set_listening_address(p.config.host, p.http->port());
  if (Status st = p.api->load(options.base); !st) {
    p.http->stop();
    p.http.reset();
    return st;
  }
  return server;
}

const std::string& Server::host() const {
  return parts_->config.host;
}
int Server::port() const {
  return parts_->http->port();
}
const std::string& Server::model_path() const {
  return parts_->first_model_path;
}

Status Server::reload() {
  Parts& p = *parts_;
  AUTOGLM_ASSIGN_OR_RETURN(const ServerConfig fresh, load_server_config(p.options.config_path, p.options.overrides));
  return p.api->reload_routes(fresh);
}
double Server::shutdown_grace_seconds() const {
  return parts_->config.shutdown_grace_s;
}

void Server::stop() {
  Parts& p = *parts_;
  if (!p.http) return;
  std::call_once(p.stopped, [&] {
    // In this order: stop accepting and drain (the HTTP server), then the tasks and the
    // engine (the service), then the connections: a sequence the engine finishes while it
    // stops releases a callback that holds one of the I/O context's strands, which must
    // still exist then (close_connections shuts the service down first).
    p.http->drain_and_stop(p.config.shutdown_grace_s);
    p.http->close_connections();
  });
}

}  // namespace autoglm
