#include "server/http/route_table.h"

namespace autoglm {
namespace {

using enum Endpoint;
constexpr Access kProbe = Access::kProbe, kWebUi = Access::kWebUi, kMetricsAccess = Access::kMetrics;

// The order is the enum's (route_of reads it by index); no two patterns fit the same path
// (tests/test_route_table.cpp), so the order never decides which route answers.
constexpr std::array<HttpRoute, kEndpointCount> kRoutes = {{
    {"POST", "/v1/chat/completions", kChatCompletions},
    {"POST", "/v1/completions", kCompletions},
    {"POST", "/v1/embeddings", kEmbeddings},
    {"POST", "/v1/responses", kCreateResponse},
    {"GET", "/v1/responses/{id}", kGetResponse},
    {"DELETE", "/v1/responses/{id}", kDeleteResponse},
    {"POST", "/v1/messages", kCreateMessage, Access::kKey, BodyLimit::kRequest, ErrorShape::kAnthropic},
    {"POST", "/v1/messages/count_tokens", kCountMessageTokens, Access::kKey, BodyLimit::kRequest,
     ErrorShape::kAnthropic},
    {"GET", "/v1/models", kModels},
    {"GET", "/v1/models/{model...}", kModel},
    {"POST", "/models/load", kLoadModel},
    {"POST", "/models/unload", kUnloadModel},
    {"POST", "/tokenize", kTokenize},
    {"POST", "/detokenize", kDetokenize},
    {"POST", "/v1/tasks", kTasks},
    {"POST", "/v1/feedback", kFeedback},
    {"POST", "/v1/async/chat/completions", kAsyncChatCompletions},
    {"POST", "/v1/async/completions", kAsyncCompletions},
    {"POST", "/v1/async/tasks", kAsyncTasks},
    {"GET", "/v1/jobs", kListJobs},
    {"GET", "/v1/jobs/{id}", kGetJob},
    {"DELETE", "/v1/jobs/{id}", kCancelJob},
    {"POST", "/v1/files", kUploadFile, Access::kKey, BodyLimit::kUpload},
    {"GET", "/v1/files", kListFiles},
    {"GET", "/v1/files/{id}", kGetFile},
    {"DELETE", "/v1/files/{id}", kDeleteFile},
    {"GET", "/v1/files/{id}/content", kFileContent},
    {"POST", "/v1/batches", kCreateBatch},
    {"GET", "/v1/batches", kListBatches},
    {"GET", "/v1/batches/{id}", kGetBatch},
    {"POST", "/v1/batches/{id}/cancel", kCancelBatch},
    {"POST", "/v1/load_lora_adapter", kLoadLoraAdapter},
    {"POST", "/v1/unload_lora_adapter", kUnloadLoraAdapter},
    {"GET", "/metrics", kMetrics, kMetricsAccess},
    {"GET", "/health", kHealth, kProbe},
    {"GET", "/ready", kReady, kProbe},
    {"GET", "/", kWebIndex, kWebUi},
    {"GET", "/dashboard", kDashboard, kWebUi},
    {"GET", "/ui/{file...}", kWebAsset, kWebUi},
}};

constexpr bool in_enum_order() {
  for (size_t i = 0; i < kRoutes.size(); ++i)
    if (int(kRoutes[i].endpoint) != int(i)) return false;
  return true;
}
static_assert(in_enum_order(), "kRoutes lists the endpoints in the order of enum Endpoint");

// The next segment of `s` (which starts after a '/'), and `s` moved past it and its '/'.
std::string_view next_segment(std::string_view& s, bool& more) {
  const size_t slash = s.find('/');
  const std::string_view segment = s.substr(0, slash);
  more = slash != std::string_view::npos;
  s = more ? s.substr(slash + 1) : std::string_view();
  return segment;
}

}  // namespace

std::span<const HttpRoute> http_routes() {
  return kRoutes;
}

const HttpRoute& route_of(Endpoint endpoint) {
  return kRoutes[size_t(endpoint)];
}

std::string_view PathParams::operator[](std::string_view name) const {
  for (int i = 0; i < size; ++i)
    if (list[size_t(i)].name == name) return list[size_t(i)].value;
  return {};
}

std::optional<PathParams> match_pattern(std::string_view pattern, std::string_view path) {
  if (pattern.empty() || pattern[0] != '/' || path.empty() || path[0] != '/') return std::nullopt;
  if (pattern == "/" || path == "/") return pattern == path ? std::optional<PathParams>(PathParams{}) : std::nullopt;
  PathParams params;
  std::string_view p = pattern.substr(1), s = path.substr(1);
  bool p_more = true, s_more = true;
  while (p_more) {
    if (!s_more) return std::nullopt;  // the path ends before the pattern
    const std::string_view want = next_segment(p, p_more);
    const bool param = want.size() > 2 && want.front() == '{' && want.back() == '}';
    if (!param) {
      if (next_segment(s, s_more) != want) return std::nullopt;
      continue;
    }
    std::string_view name = want.substr(1, want.size() - 2);
    const bool rest = name.size() > 3 && name.ends_with("...");
    std::string_view value;
    if (rest) {  // the rest of the path, '/' included
      name.remove_suffix(3);
      value = s;
      s = {};
      s_more = false;
    } else {
      value = next_segment(s, s_more);
    }
    if (value.empty() || params.size == int(params.list.size())) return std::nullopt;
    params.list[size_t(params.size++)] = {name, value};
  }
  if (s_more) return std::nullopt;  // segments (or a trailing '/') past the pattern
  return params;
}

RouteLookup find_route(std::string_view method, std::string_view path) {
  const std::string_view as = method == "HEAD" ? std::string_view("GET") : method;
  RouteLookup found;
  for (const HttpRoute& r : kRoutes) {
    auto params = match_pattern(r.pattern, path);
    if (!params) continue;
    if (!found.on_path) {
      found.on_path = &r;
      found.params = *params;
    }
    if (r.method == as) {
      found.route = &r;
      found.params = *params;
      break;
    }
  }
  return found;
}

std::string_view endpoint_path(Endpoint endpoint) {
  return route_of(endpoint).pattern;
}

std::optional<Endpoint> endpoint_from_path(std::string_view method, std::string_view path) {
  const RouteLookup found = find_route(method, path);
  if (!found.route) return std::nullopt;
  return found.route->endpoint;
}

}  // namespace autoglm
