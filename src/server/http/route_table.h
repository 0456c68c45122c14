// The API's HTTP routes: one list, read by admission (ApiService::admit, body_limit) and by
// dispatch (ApiService::route). A route is a method, a path pattern, the Endpoint it answers,
// who may call it, and its body limit; each handler group binds its Endpoints' handlers
// (server/handler_table.h), which dispatch calls.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string_view>

namespace autoglm {

// What each route of the API answers: one route each (route_table.cpp lists them, in this
// order). A closed set: kWebAsset is the last, and kEndpointCount counts them.
enum class Endpoint {
  kChatCompletions,
  kCompletions,
  kEmbeddings,
  kCreateResponse,
  kGetResponse,
  kDeleteResponse,
  kCreateMessage,
  kCountMessageTokens,
  kModels,
  kModel,
  kLoadModel,
  kUnloadModel,
  kTokenize,
  kDetokenize,
  kTasks,
  kFeedback,
  kAsyncChatCompletions,
  kAsyncCompletions,
  kAsyncTasks,
  kListJobs,
  kGetJob,
  kCancelJob,
  kUploadFile,
  kListFiles,
  kGetFile,
  kDeleteFile,
  kFileContent,
  kCreateBatch,
  kListBatches,
  kGetBatch,
  kCancelBatch,
  kLoadLoraAdapter,
  kUnloadLoraAdapter,
  kMetrics,
  kHealth,
  kReady,
  kWebIndex,
  kDashboard,
  kWebAsset,
};
inline constexpr int kEndpointCount = int(Endpoint::kWebAsset) + 1;

// Who may call a route, and what admission asks of it.
enum class Access {
  kKey,      // the API key (when keys are set) and the rate limit; refused while draining
  kProbe,    // /health, /ready: open to all (no key, no rate limit), answered while draining and loading
  kWebUi,    // the web UI's files: no key and no rate limit (the pages ask for a key themselves),
             // answered while loading; refused while draining
  kMetrics,  // /metrics: the key only with metrics_require_key, no rate limit; answered while draining
};

// Whose conventions a route's errors follow: OpenAI's {"error": {"message", "type", "param"}},
// or Anthropic's {"type": "error", "error": {"type", "message"}} (the Messages API).
enum class ErrorShape { kOpenAI, kAnthropic };

// The most body bytes a request may send: max_body_bytes, or an upload's (jobs.max_file_bytes).
enum class BodyLimit { kRequest, kUpload };

struct HttpRoute {
  std::string_view method;  // "GET" answers HEAD too (GET's headers, no body)
  // Segments between '/': a literal, "{name}" (one segment, not empty), or "{name...}" as the
  // last (the rest of the path, not empty, '/' included: a model's name may hold one).
  std::string_view pattern;
  Endpoint endpoint;
  Access access = Access::kKey;
  BodyLimit body = BodyLimit::kRequest;
  ErrorShape errors = ErrorShape::kOpenAI;
};

// Every route, each Endpoint exactly once.
std::span<const HttpRoute> http_routes();
// The route of an endpoint.
const HttpRoute& route_of(Endpoint endpoint);

// A path's parameters, as a route's pattern names them (views into the path).
struct PathParams {
  struct Param {
    std::string_view name, value;
  };
  std::array<Param, 2> list{};
  int size = 0;
  // The value of {name} or {name...}; "" when the pattern has none of that name.
  std::string_view operator[](std::string_view name) const;
};

// Whether `path` (no query) fits `pattern`, and its parameters when it does.
std::optional<PathParams> match_pattern(std::string_view pattern, std::string_view path);

// What the table says of a request: the route that answers it, or why none does.
struct RouteLookup {
  const HttpRoute* route = nullptr;    // the route of this method and path (GET's for HEAD)
  const HttpRoute* on_path = nullptr;  // the first route of this path whatever its method; null: no such path
  PathParams params;                   // route's (or on_path's) parameters
  bool not_found() const { return on_path == nullptr; }                               // a 404
  bool method_not_allowed() const { return on_path != nullptr && route == nullptr; }  // a 405
};
RouteLookup find_route(std::string_view method, std::string_view path);

// The path of an endpoint without parameters ("/v1/chat/completions"), as jobs and batches
// store the endpoint they target; a route with parameters gives its pattern.
std::string_view endpoint_path(Endpoint endpoint);
// The endpoint that answers `method` on `path` (as find_route decides), if any:
// endpoint_from_path("POST", "/v1/tasks") is Endpoint::kTasks, and the inverse of endpoint_path.
std::optional<Endpoint> endpoint_from_path(std::string_view method, std::string_view path);

}  // namespace autoglm
