// The API's route table (server/route_table.h): every route matches its own pattern and
// extracts its parameters; trailing slashes, extra segments and wrong methods get 404 or 405;
// each Endpoint has exactly one route; no two patterns fit the same path.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "server/http/route_table.h"

namespace autoglm {
namespace {

// A path that fits `pattern`: each parameter replaced by a value (a rest parameter by two
// segments, to show it takes '/').
std::string sample_path(std::string_view pattern, std::string_view value = "x1") {
  std::string out;
  size_t at = 0;
  while (at < pattern.size()) {
    const size_t open = pattern.find('{', at);
    if (open == std::string_view::npos) {
      out += pattern.substr(at);
      break;
    }
    const size_t close = pattern.find('}', open);
    out += pattern.substr(at, open - at);
    const bool rest = pattern.substr(open, close - open).ends_with("...");
    out += std::string(value) + (rest ? "/y2" : "");
    at = close + 1;
  }
  return out;
}

std::vector<std::string_view> param_names(std::string_view pattern) {
  std::vector<std::string_view> names;
  for (size_t open = pattern.find('{'); open != std::string_view::npos; open = pattern.find('{', open + 1)) {
    std::string_view name = pattern.substr(open + 1, pattern.find('}', open) - open - 1);
    if (name.ends_with("...")) name.remove_suffix(3);
    names.push_back(name);
  }
  return names;
}

TEST(RouteTable, EveryEndpointHasExactlyOneRoute) {
  std::vector<int> seen(kEndpointCount, 0);
  for (const HttpRoute& r : http_routes()) {
    ASSERT_GE(int(r.endpoint), 0);
    ASSERT_LT(int(r.endpoint), kEndpointCount);
    ++seen[size_t(r.endpoint)];
  }
  for (int e = 0; e < kEndpointCount; ++e) {
    EXPECT_EQ(seen[size_t(e)], 1) << "endpoint " << e;
    EXPECT_EQ(route_of(Endpoint(e)).endpoint, Endpoint(e));
  }
}

TEST(RouteTable, NoTwoRoutesShareMethodAndPattern) {
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const HttpRoute& r : http_routes()) {
    EXPECT_TRUE(seen.insert({r.method, r.pattern}).second) << r.method << " " << r.pattern;
    EXPECT_TRUE(r.method == "GET" || r.method == "POST" || r.method == "DELETE") << r.method;
  }
}

TEST(RouteTable, EveryRouteMatchesItsPatternAndExtractsItsParameters) {
  for (const HttpRoute& r : http_routes()) {
    const std::string path = sample_path(r.pattern);
    const RouteLookup found = find_route(r.method, path);
    ASSERT_NE(found.route, nullptr) << r.method << " " << path;
    EXPECT_EQ(found.route, &r) << r.method << " " << path;
    const std::vector<std::string_view> names = param_names(r.pattern);
    EXPECT_EQ(found.params.size, int(names.size())) << r.pattern;
    for (std::string_view name : names) {
      const bool rest = r.pattern.find(std::string(name) + "...}") != std::string_view::npos;
      EXPECT_EQ(found.params[name], rest ? "x1/y2" : "x1") << r.pattern << " {" << name << "}";
    }
    if (r.method == "GET") {
      EXPECT_EQ(find_route("HEAD", path).route, &r) << path;  // HEAD: GET's route
    }
  }
}

TEST(RouteTable, NoPatternShadowsAnother) {
  // A path made from one pattern fits no route of another pattern (so the table's order never
  // decides which route answers), whatever the parameter's value looks like.
  for (const HttpRoute& r : http_routes())
    for (std::string_view value : {"x1", "content", "cancel", "models", "{id}"}) {
      const std::string path = sample_path(r.pattern, value);
      for (const HttpRoute& other : http_routes())
        if (other.pattern != r.pattern) {
          EXPECT_FALSE(match_pattern(other.pattern, path)) << path << " fits " << r.pattern << " and " << other.pattern;
        }
    }
}

TEST(RouteTable, RoutesOfOnePathAgreeOnAccess) {
  // Admission reads draining and keys per path, whatever the method: the routes of a pattern
  // must not disagree.
  for (const HttpRoute& a : http_routes())
    for (const HttpRoute& b : http_routes())
      if (a.pattern == b.pattern) {
        EXPECT_EQ(a.access, b.access) << a.pattern;
      }
}

TEST(RouteTable, Examples) {
  struct Case {
    const char* method;
    const char* path;
    std::optional<Endpoint> endpoint;  // none: 404 or 405
    bool path_known;                   // with no endpoint: 405 (true) or 404 (false)
    const char* param = "";
    const char* value = "";
  };
  const Case cases[] = {
      {"POST", "/v1/chat/completions", Endpoint::kChatCompletions, true},
      {"GET", "/v1/chat/completions", std::nullopt, true},     // 405
      {"HEAD", "/v1/chat/completions", std::nullopt, true},    // 405: no GET route
      {"PUT", "/v1/chat/completions", std::nullopt, true},     // 405
      {"POST", "/v1/chat/completions/", std::nullopt, false},  // trailing slash: 404
      {"POST", "/v1/chat/completions/x", std::nullopt, false},
      {"POST", "/v1/chat", std::nullopt, false},
      {"POST", "/v1//chat/completions", std::nullopt, false},
      {"POST", "v1/chat/completions", std::nullopt, false},
      {"POST", "", std::nullopt, false},
      {"GET", "/v1/nothing", std::nullopt, false},
      {"GET", "/v1/jobs/job_1", Endpoint::kGetJob, true, "id", "job_1"},
      {"DELETE", "/v1/jobs/job_1", Endpoint::kCancelJob, true, "id", "job_1"},
      {"POST", "/v1/jobs/job_1", std::nullopt, true},  // 405
      {"GET", "/v1/jobs/", std::nullopt, false},
      {"GET", "/v1/jobs/job_1/", std::nullopt, false},
      {"GET", "/v1/jobs/job_1/x", std::nullopt, false},
      {"GET", "/v1/jobs", Endpoint::kListJobs, true},
      {"DELETE", "/v1/jobs", std::nullopt, true},
      {"DELETE", "/v1/responses/resp_9", Endpoint::kDeleteResponse, true, "id", "resp_9"},
      {"GET", "/v1/responses/resp_9", Endpoint::kGetResponse, true, "id", "resp_9"},
      {"GET", "/v1/files/file-3/content", Endpoint::kFileContent, true, "id", "file-3"},
      {"HEAD", "/v1/files/file-3/content", Endpoint::kFileContent, true, "id", "file-3"},
      {"DELETE", "/v1/files/file-3/content", std::nullopt, true},  // 405
      {"GET", "/v1/files/file-3", Endpoint::kGetFile, true, "id", "file-3"},
      {"DELETE", "/v1/files/file-3", Endpoint::kDeleteFile, true, "id", "file-3"},
      {"GET", "/v1/files/file-3/other", std::nullopt, false},
      {"GET", "/v1/files/content", Endpoint::kGetFile, true, "id", "content"},  // an id, as any other
      {"POST", "/v1/files", Endpoint::kUploadFile, true},
      {"GET", "/v1/files", Endpoint::kListFiles, true},
      {"HEAD", "/v1/files", Endpoint::kListFiles, true},
      {"POST", "/v1/batches/b1/cancel", Endpoint::kCancelBatch, true, "id", "b1"},
      {"GET", "/v1/batches/b1/cancel", std::nullopt, true},  // 405
      {"GET", "/v1/batches/b1", Endpoint::kGetBatch, true, "id", "b1"},
      {"POST", "/v1/batches/b1", std::nullopt, true},  // 405
      {"POST", "/v1/batches//cancel", std::nullopt, false},
      {"GET", "/v1/models", Endpoint::kModels, true},
      {"GET", "/v1/models/", std::nullopt, false},
      {"GET", "/v1/models/qwen", Endpoint::kModel, true, "model", "qwen"},
      {"GET", "/v1/models/org/qwen", Endpoint::kModel, true, "model", "org/qwen"},  // a name with '/'
      {"GET", "/v1/models/qwen/", Endpoint::kModel, true, "model", "qwen/"},
      {"DELETE", "/v1/models/qwen", std::nullopt, true},
      {"POST", "/v1/async/chat/completions", Endpoint::kAsyncChatCompletions, true},
      {"POST", "/v1/async/embeddings", std::nullopt, false},
      {"GET", "/", Endpoint::kWebIndex, true},
      {"POST", "/", std::nullopt, true},
      {"GET", "//", std::nullopt, false},
      {"GET", "/dashboard", Endpoint::kDashboard, true},
      {"GET", "/ui/chat.js", Endpoint::kWebAsset, true, "file", "chat.js"},
      {"GET", "/ui/a/b.js", Endpoint::kWebAsset, true, "file", "a/b.js"},
      {"GET", "/ui/", std::nullopt, false},
      {"GET", "/ui", std::nullopt, false},
      {"GET", "/health", Endpoint::kHealth, true},
      {"POST", "/health", std::nullopt, true},
      {"OPTIONS", "/health", std::nullopt, true},
      {"GET", "/metrics", Endpoint::kMetrics, true},
  };
  for (const Case& c : cases) {
    const RouteLookup found = find_route(c.method, c.path);
    const std::string what = std::string(c.method) + " " + c.path;
    if (c.endpoint) {
      ASSERT_NE(found.route, nullptr) << what;
      EXPECT_EQ(found.route->endpoint, *c.endpoint) << what;
      EXPECT_EQ(found.params[c.param], c.value) << what;
      EXPECT_FALSE(found.not_found() || found.method_not_allowed()) << what;
    } else {
      EXPECT_EQ(found.route, nullptr) << what;
      EXPECT_EQ(found.method_not_allowed(), c.path_known) << what;
      EXPECT_EQ(found.not_found(), !c.path_known) << what;
    }
  }
}

TEST(RouteTable, AdmissionFlags) {
  EXPECT_EQ(route_of(Endpoint::kHealth).access, Access::kProbe);
  EXPECT_EQ(route_of(Endpoint::kReady).access, Access::kProbe);
  EXPECT_EQ(route_of(Endpoint::kMetrics).access, Access::kMetrics);
  for (Endpoint e : {Endpoint::kWebIndex, Endpoint::kDashboard, Endpoint::kWebAsset})
    EXPECT_EQ(route_of(e).access, Access::kWebUi);
  int uploads = 0;
  for (const HttpRoute& r : http_routes()) uploads += r.body == BodyLimit::kUpload;
  EXPECT_EQ(uploads, 1);
  EXPECT_EQ(route_of(Endpoint::kUploadFile).body, BodyLimit::kUpload);
  EXPECT_EQ(find_route("POST", "/v1/files").route->body, BodyLimit::kUpload);
  EXPECT_EQ(find_route("GET", "/v1/files").route->body, BodyLimit::kRequest);
}

TEST(RouteTable, EndpointPathRoundTrips) {
  EXPECT_EQ(endpoint_path(Endpoint::kChatCompletions), "/v1/chat/completions");
  EXPECT_EQ(endpoint_path(Endpoint::kTasks), "/v1/tasks");
  EXPECT_EQ(endpoint_from_path("POST", "/v1/completions"), Endpoint::kCompletions);
  EXPECT_EQ(endpoint_from_path("POST", "/v1/embeddings"), Endpoint::kEmbeddings);
  EXPECT_EQ(endpoint_from_path("GET", "/v1/tasks"), std::nullopt);
  EXPECT_EQ(endpoint_from_path("POST", "/v1/nothing"), std::nullopt);
  for (const HttpRoute& r : http_routes())
    EXPECT_EQ(endpoint_from_path(r.method, endpoint_path(r.endpoint)), r.endpoint) << r.pattern;
}

TEST(RouteTable, MatchPattern) {
  EXPECT_TRUE(match_pattern("/", "/"));
  EXPECT_FALSE(match_pattern("/", "/x"));
  EXPECT_FALSE(match_pattern("/a", "/"));
  auto two = match_pattern("/a/{x}/b/{y}", "/a/1/b/2");
  ASSERT_TRUE(two);
  EXPECT_EQ(two->size, 2);
  EXPECT_EQ((*two)["x"], "1");
  EXPECT_EQ((*two)["y"], "2");
  EXPECT_EQ((*two)["z"], "");
  EXPECT_FALSE(match_pattern("/a/{x}/b/{y}", "/a/1/b"));
  EXPECT_FALSE(match_pattern("/a/{x}/b/{y}", "/a/1/b/"));
  EXPECT_FALSE(match_pattern("/a/{x}/b/{y}", "/a//b/2"));
  auto rest = match_pattern("/a/{r...}", "/a//x/");
  ASSERT_TRUE(rest);
  EXPECT_EQ((*rest)["r"], "/x/");
  EXPECT_FALSE(match_pattern("/a/{r...}", "/a/"));
  EXPECT_FALSE(match_pattern("/a/{r...}", "/a"));
}

}  // namespace
}  // namespace autoglm
