// The HTTP server with a raw client: status codes and error shapes for bad input,
// idle connections, auth, queue limits, prefix reuse in usage and /metrics, cancellation.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <nlohmann/json.hpp>
#include <regex>

#include "engine/generator.h"
#include "http_test_util.h"
#include "server/api.h"
#include "server/http/access_log.h"
#include "server/http/http_server.h"
#include "server_test_util.h"
#include "test_util.h"

namespace autoglm {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;

struct Response {
  int status = 0;
  std::string body;
  std::string retry_after;
  std::string cache;  // X-AutoGLM-Cache
  json j() const { return json::parse(body, nullptr, false); }
};

Response request(int port, const std::string& method, const std::string& target, const std::string& body = "",
                 const std::string& auth = "", const std::string& cache_control = "") {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!auth.empty()) headers.emplace_back("Authorization", auth);
  if (!cache_control.empty()) headers.emplace_back("Cache-Control", cache_control);
  const test::HttpResult res = test::http_call(port, method, target, body, headers);
  Response r;
  r.status = res.status;
  r.body = res.body;
  r.retry_after = res.header("Retry-After");
  r.cache = res.header("X-AutoGLM-Cache");
  return r;
}

double metric(int port, const std::string& selector) {
  return test::metric_in(request(port, "GET", "/metrics").body, selector);
}

class Server : public test::ServerTest {
 protected:
  using test::ServerTest::start;
  // The defaults. (A temporary ServerConfig{} passed by value trips GCC 12's
  // -Wmaybe-uninitialized at -O3, a false positive that -Werror in CI turns into an error.)
  void start() { start(default_config()); }
  static const ServerConfig& default_config() {
    static const ServerConfig defaults;
    return defaults;
  }
  std::string chat(const std::string& content, int max_tokens, bool stream = false) {
    return json{{"messages", {{{"role", "user"}, {"content", content}}}},
                {"max_tokens", max_tokens},
                {"temperature", 0},
                {"stream", stream}}
        .dump();
  }
};

void expect_error(const Response& r, int status, const std::string& param) {
  EXPECT_EQ(r.status, status) << r.body;
  const json j = r.j();
  ASSERT_TRUE(j.contains("error")) << r.body;
  EXPECT_TRUE(j["error"]["message"].is_string());
  EXPECT_TRUE(j["error"].contains("type"));
  EXPECT_TRUE(j["error"].contains("code"));
  if (!param.empty()) {
    EXPECT_EQ(j["error"]["param"], param) << r.body;
  }
}

// Sends `bytes` as they are and returns the status of the reply, or 0 when the server
// closed the connection without one.
// With half_close, the client then shuts its write side (it still reads). `after` is sent
// while the request (a generation of `api`'s) is being answered: the engine is held from before
// the request until `after` is in, once the request is in flight.
std::string raw_response(int port, const std::string& bytes, bool half_close = false, const std::string& after = "",
                         ApiService* api = nullptr) {
  std::optional<test::EngineHold> hold;
  if (!after.empty()) {
    if (!api) ADD_FAILURE() << "`after` needs the ApiService to order it";
    if (!api || !test::wait_until([&] { return api->in_flight() == 0; }))
      ADD_FAILURE() << "an earlier request never left";
    if (api) hold.emplace(*api);
  }
  net::io_context ioc;
  tcp::socket socket(ioc);
  beast::error_code ec;
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), uint16_t(port)), ec);
  net::write(socket, net::buffer(bytes), ec);  // the server may stop reading early
  if (half_close) socket.shutdown(tcp::socket::shutdown_send, ec);
  if (!after.empty()) {
    if (api && !test::wait_until([&] { return api->in_flight() >= 1; }))
      ADD_FAILURE() << "the request never got in flight";
    net::write(socket, net::buffer(after), ec);
    hold.reset();
  }
  std::string reply;
  std::array<char, 4096> buf;
  for (size_t n; (n = socket.read_some(net::buffer(buf), ec)) > 0 || !ec;) reply.append(buf.data(), n);
  return reply;
}

// The status of raw_response's reply, or 0 when the server closed the connection without one.
int raw_exchange(int port, const std::string& bytes, bool half_close = false, const std::string& after = "",
                 ApiService* api = nullptr) {
  const std::string reply = raw_response(port, bytes, half_close, after, api);
  if (reply.compare(0, 9, "HTTP/1.1 ") != 0) return 0;
  return std::atoi(reply.c_str() + 9);
}

// A reply's header block (lower-cased) and body.
std::pair<std::string, std::string> split_reply(std::string reply) {
  const size_t end = reply.find("\r\n\r\n");
  std::string head = reply.substr(0, end);
  for (char& c : head) c = char(std::tolower(static_cast<unsigned char>(c)));
  return {head, end == std::string::npos ? "" : reply.substr(end + 4)};
}

std::string chunked_tokenize(const std::string& size_line, const std::string& trailer, const std::string& extra = "") {
  return "POST /tokenize HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + extra + "Transfer-Encoding: chunked\r\n\r\n" +
         size_line + "\r\n{\"content\":\"hello\"}\r\n0\r\n" + trailer + "\r\n";
}

// The request line and headers of a POST /tokenize with `key` whose body will be `length` bytes.
std::string tokenize_head(const std::string& key, size_t length, const std::string& extra = "") {
  return "POST /tokenize HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer " + key +
         "\r\nContent-Length: " + std::to_string(length) + "\r\n" + extra + "\r\n";
}

tcp::socket connected(net::io_context& ioc, int port) {
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), uint16_t(port)));
  return s;
}

// Whether the server has closed this connection (a read finds its end, or a reset), without
// waiting for it.
bool closed_by_server(tcp::socket& s) {
  s.non_blocking(true);
  std::array<char, 256> buf;
  beast::error_code ec;
  s.read_some(net::buffer(buf), ec);
  return ec && ec != net::error::would_block && ec != net::error::try_again;
}

// A request the server refuses anyway (wrong key, unknown route) is answered from its headers,
// before its body arrives; bodies held at once are bounded across connections, counted as
// their bytes arrive.
TEST_F(Server, BodiesAreReadOnlyAfterTheKeyCheckAndWithinTheirBudget) {
  ServerConfig cfg;
  cfg.api_keys = {"key-a"};
  cfg.max_body_bytes_in_flight = 100000;
  start(cfg);
  // No body is sent: the old server waited for it (until its idle timeout) before checking the key.
  EXPECT_EQ(raw_exchange(port, tokenize_head("wrong", 8000000)), 401);
  // One connection holds 60 000 bytes of an 80 000-byte body it stops sending...
  net::io_context ioc;
  tcp::socket holder = connected(ioc, port);
  net::write(holder, net::buffer(tokenize_head("key-a", 80000) + std::string(60000, 'a')));
  ASSERT_TRUE(test::wait_until([&] { return server->body_bytes_in_flight() == 60000; }))
      << "the server never held the 60 000 bytes sent: " << server->body_bytes_in_flight();
  // ...so a body announced at 80 000 more would pass the budget: 503, try again, before it is sent.
  EXPECT_EQ(raw_exchange(port, tokenize_head("key-a", 80000)), 503);
  holder.close();  // what it holds goes back, once the server has seen the close
  EXPECT_TRUE(test::wait_until([&] { return server->body_bytes_in_flight() == 0; }))
      << "the closed connection's bytes were never given back: " << server->body_bytes_in_flight();
  const std::string body = json{{"content", std::string(79000, 'a')}}.dump();
  EXPECT_EQ(raw_exchange(port, tokenize_head("key-a", body.size()) + body), 200);
}

// An announced Content-Length takes nothing from the budget (it used to be reserved at once and
// held until the read deadline: a few header-only connections made every other POST a 503).
TEST_F(Server, AnnouncedBodiesTakeNoBudgetUntilTheirBytesArrive) {
  ServerConfig cfg;
  cfg.max_body_bytes_in_flight = 100000;
  start(cfg);
  net::io_context ioc;
  std::vector<tcp::socket> holders;
  for (int i = 0; i < 8; ++i) {  // each is told to go on, so the server waits for its body
    holders.push_back(connected(ioc, port));
    net::write(holders.back(), net::buffer(tokenize_head("", 80000, "Expect: 100-continue\r\n")));
    std::string interim(25, '\0');
    beast::error_code ec;
    net::read(holders.back(), net::buffer(interim), ec);
    ASSERT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n") << "holder " << i << " was refused";
  }
  EXPECT_EQ(server->body_bytes_in_flight(), 0);
  const std::string body = json{{"content", std::string(79000, 'a')}}.dump();
  EXPECT_EQ(raw_exchange(port, tokenize_head("", body.size()) + body), 200);
}

// A parsed body counts against the budget too: a body of small values ([[],[],...]) takes
// tens of times its bytes once parsed (four 8 MiB ones added 512 MB at once). One that could
// never fit is a 413 (retrying cannot help), whether an object or an array at the top; one that
// fits alone but not beside the bytes in flight now is a 503 to retry.
TEST_F(Server, ParsedBodiesCountAgainstTheBodyBudget) {
  ServerConfig cfg;
  cfg.max_body_bytes_in_flight = 2 << 20;
  start(cfg);
  const auto empties = [](int n) {
    std::string s = "[]";
    for (int i = 1; i < n; ++i) s += ",[]";
    return s;
  };
  for (const std::string& body : {R"({"input": [)" + empties(100000) + "]}", "[" + empties(100000) + "]"}) {
    const Response never = request(port, "POST", "/v1/embeddings", body);
    expect_error(never, 413, "");
    EXPECT_NE(never.body.find("its JSON values count too"), std::string::npos) << never.body;
  }
  // 1.5 MiB of a body held in flight, then a body that would fit alone.
  net::io_context ioc;
  tcp::socket holder = connected(ioc, port);
  net::write(holder, net::buffer(tokenize_head("", 1600000) + std::string(1500000, ' ')));
  ASSERT_TRUE(test::wait_until([&] { return server->body_bytes_in_flight() >= 1500000; }))
      << "the held body never arrived: " << server->body_bytes_in_flight();
  const Response busy = request(port, "POST", "/v1/embeddings", R"({"input": [)" + empties(10000) + "]}");
  expect_error(busy, 503, "");
  EXPECT_NE(busy.body.find("a parsed body counts too"), std::string::npos) << busy.body;
  EXPECT_EQ(busy.retry_after, "1");
  holder.close();
  EXPECT_TRUE(test::wait_until([&] { return server->body_bytes_in_flight() == 0; }))
      << "bytes were never given back: " << server->body_bytes_in_flight();
  EXPECT_EQ(request(port, "POST", "/tokenize", R"({"content": "hello"})").status, 200);
}

// A body that never starts, or stops, is closed after body_timeout_s (not the 60 s of a whole
// request), and what it sent goes back to the budget.
TEST_F(Server, BodiesThatStopComingAreClosedAfterTheBodyTimeout) {
  ServerConfig cfg;
  cfg.body_timeout_s = 2;
  start(cfg);
  net::io_context ioc;
  tcp::socket silent = connected(ioc, port);
  tcp::socket stalled = connected(ioc, port);
  net::write(silent, net::buffer(tokenize_head("", 1000)));
  net::write(stalled, net::buffer(tokenize_head("", 1000) + std::string(600, 'a')));
  ASSERT_TRUE(test::wait_until([&] { return server->body_bytes_in_flight() == 600; }))
      << "the server never held the 600 bytes sent: " << server->body_bytes_in_flight();
  const auto bound = std::chrono::seconds(30);  // the old deadline was 60 s
  EXPECT_TRUE(test::wait_until([&] { return closed_by_server(silent); }, bound))
      << "a connection that sent only headers was kept";
  EXPECT_TRUE(test::wait_until([&] { return closed_by_server(stalled); }, bound))
      << "a connection whose body stopped was kept";
  EXPECT_TRUE(test::wait_until([&] { return server->body_bytes_in_flight() == 0; }))
      << "the stalled body's bytes were never given back: " << server->body_bytes_in_flight();
}

// On a keyed server one key holds at most max_body_bytes_in_flight_per_client; the others
// still have the rest.
TEST_F(Server, OneKeyCannotTakeTheWholeBodyBudget) {
  ServerConfig cfg;
  cfg.api_keys = {"key-a", "key-b"};
  cfg.max_body_bytes = 40000;
  cfg.max_body_bytes_in_flight = 100000;
  cfg.max_body_bytes_in_flight_per_client = 50000;
  start(cfg);
  net::io_context ioc;
  tcp::socket holder = connected(ioc, port);
  net::write(holder, net::buffer(tokenize_head("key-a", 40000) + std::string(30000, 'a')));
  ASSERT_TRUE(test::wait_until([&] { return server->body_bytes_in_flight() == 30000; }))
      << "the server never held the 30 000 bytes sent: " << server->body_bytes_in_flight();
  // key-a has 20 000 left of its share: a second 40 000-byte body is refused from its headers.
  // (Half-closed: a server that waited for the body would end it, not hang the test.)
  EXPECT_EQ(raw_exchange(port, tokenize_head("key-a", 40000), true), 503);
  // key-b has the rest of the budget.
  const std::string body = json{{"content", std::string(35000, 'a')}}.dump();
  EXPECT_EQ(raw_exchange(port, tokenize_head("key-b", body.size()) + body), 200);
}

// logit_bias with OpenAI's semantics: -100 bans a token, +100 forces it; a wrong entry is a
// 400 naming it.
TEST_F(Server, SpeculationIsCountedAndARequestCanOptOut) {
  ServerConfig cfg;
  cfg.runtime.speculative = SpecMethod::kNgram;
  start(cfg);
  const std::string prompt = "Lily went to the park. She saw a big dog. Lily went to the park. She saw a big";
  json body = {{"prompt", prompt}, {"max_tokens", 32}, {"temperature", 0}, {"speculative", false}};
  const Response plain = request(port, "POST", "/v1/completions", body.dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(metric(port, "autoglm_spec_drafted_tokens_total"), 0);
  body.erase("speculative");
  const Response fast = request(port, "POST", "/v1/completions", body.dump());
  ASSERT_EQ(fast.status, 200) << fast.body;
  EXPECT_EQ(fast.j()["choices"][0]["text"], plain.j()["choices"][0]["text"]);
  EXPECT_GT(metric(port, "autoglm_spec_drafted_tokens_total"), 0);
  EXPECT_GE(metric(port, "autoglm_spec_accepted_tokens_total"), 0);
  EXPECT_GT(metric(port, "autoglm_spec_target_passes_total"), 0);
  EXPECT_EQ(metric(port, "autoglm_spec_acceptance_rate_count"), 1);
  body["speculative"] = "yes";
  EXPECT_EQ(request(port, "POST", "/v1/completions", body.dump()).status, 400);
}

TEST_F(Server, LogitBiasBansAndForcesTokens) {
  start();
  const auto first_token = [&](const json& bias, double temperature) {
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 1}, {"temperature", temperature}, {"seed", 7}};
    if (!bias.is_null()) body["logit_bias"] = bias;
    const Response r = request(port, "POST", "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.j()["choices"][0]["text"].get<std::string>();
  };
  // The id of the token a completion added: the last one of prompt + text, tokenized together.
  const auto last_id = [&](const std::string& text) {
    const Response r =
        request(port, "POST", "/tokenize", json{{"content", "Once upon a time" + text}, {"add_special", false}}.dump());
    return r.j()["tokens"].back().get<int>();
  };
  const std::string greedy = first_token(nullptr, 0);
  ASSERT_FALSE(greedy.empty());
  const int banned = last_id(greedy);
  json ban = json::object();
  ban[std::to_string(banned)] = -100;
  const std::string other = first_token(ban, 0);
  EXPECT_NE(other, greedy) << "a banned token was chosen";
  const int forced = last_id(" cat");
  ASSERT_NE(forced, banned);
  json force = json::object();
  force[std::to_string(forced)] = 100;
  for (double temperature : {0.0, 1.0}) EXPECT_EQ(last_id(first_token(force, temperature)), forced) << temperature;
  const auto bad_bias = [&](const json& bias, const std::string& param) {
    const json body = {{"prompt", "x"}, {"max_tokens", 1}, {"logit_bias", bias}};
    expect_error(request(port, "POST", "/v1/completions", body.dump()), 400, param);
  };
  bad_bias({{"abc", 1}}, "logit_bias.abc");
  bad_bias({{"5", 101}}, "logit_bias.5");
  bad_bias({{"5", "high"}}, "logit_bias.5");
  bad_bias({{"999999", 1}}, "logit_bias.999999");
  bad_bias(json::array({1}), "logit_bias");
}

// A "developer" message is the system message (it used to be dropped from the prompt).
TEST_F(Server, DeveloperMessagesAreSystemMessages) {
  start();
  const auto prompt_tokens = [&](const std::string& role) {
    const json body = {
        {"messages",
         {{{"role", role}, {"content", "Answer in one short sentence."}}, {{"role", "user"}, {"content", "Hi"}}}},
        {"max_tokens", 1}};
    const Response r = request(port, "POST", "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.j()["usage"]["prompt_tokens"].get<int>();
  };
  EXPECT_EQ(prompt_tokens("developer"), prompt_tokens("system"));
}

// The phone agent's request shape (a screenshot part before the text) to a text-only model: a
// 400 naming the image part.
TEST_F(Server, AnImagePartToATextModelIsNamed) {
  start();
  const json body = {{"messages",
                      {{{"role", "user"},
                        {"content",
                         {{{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,iVBORw0KGgo="}}}},
                          {{"type", "text"}, {"text", "Tap the icon"}}}}}}},
                     {"max_tokens", 1}};
  const Response r = request(port, "POST", "/v1/chat/completions", body.dump());
  expect_error(r, 400, "messages[0].content[0]");
  EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("reads text only"), std::string::npos) << r.body;
}

// GET /v1/models/{id}, and HEAD on every GET route: GET's headers (Content-Length included), no body.
TEST_F(Server, ModelRetrievalAndHead) {
  start();
  const std::string name = "stories260K.gguf";  // the served name: the file name
  const Response one = request(port, "GET", "/v1/models/" + name);
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.j()["id"], name);
  EXPECT_EQ(one.j()["object"], "model");
  const Response missing = request(port, "GET", "/v1/models/gpt-4");
  expect_error(missing, 404, "model");
  EXPECT_NE(missing.body.find("serves 'stories260K.gguf'"), std::string::npos) << missing.body;
  const std::string list = request(port, "GET", "/v1/models").body;
  for (const std::string route : {"/v1/models", "/health", "/v1/models/stories260K.gguf", "/metrics"}) {
    const auto [head, body] =
        split_reply(raw_response(port, "HEAD " + route + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    EXPECT_EQ(head.compare(0, 12, "http/1.1 200"), 0) << route << ": " << head;
    EXPECT_EQ(body, "") << route;
    if (route == "/v1/models") {
      EXPECT_NE(head.find("content-length: " + std::to_string(list.size())), std::string::npos) << head;
    }
  }
  EXPECT_EQ(raw_exchange(port, "HEAD /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 405);
}

// CORS: off by default; on, a preflight is answered without a key and every reply to an
// allowed origin carries Access-Control-Allow-Origin, streams included.
TEST_F(Server, CorsPreflightAndHeaders) {
  const std::string preflight =
      "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nOrigin: https://app.example\r\n"
      "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization, content-type\r\n\r\n";
  {
    start();
    const auto [head, body] = split_reply(raw_response(port, preflight));
    EXPECT_EQ(head.compare(0, 12, "http/1.1 405"), 0) << head;
    EXPECT_EQ(head.find("access-control-allow-origin"), std::string::npos) << head;
    server->stop();
  }
  ServerConfig cfg;
  cfg.api_keys = {"key-a"};
  cfg.cors_allow_origins = {"https://app.example"};
  start(cfg);
  const auto [head, body] = split_reply(raw_response(port, preflight));
  EXPECT_EQ(head.compare(0, 12, "http/1.1 204"), 0) << head;
  EXPECT_NE(head.find("access-control-allow-origin: https://app.example"), std::string::npos) << head;
  EXPECT_NE(head.find("access-control-allow-headers: authorization, content-type"), std::string::npos) << head;
  EXPECT_NE(head.find("access-control-allow-methods: get, head, post, delete, options"), std::string::npos) << head;
  const auto post = [&](const std::string& origin, bool stream) {
    const std::string b = chat("Once upon a time", 4, stream);
    return split_reply(raw_response(port,
                                    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                    "Authorization: Bearer key-a\r\nOrigin: " +
                                        origin + "\r\nContent-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b))
        .first;
  };
  EXPECT_NE(post("https://app.example", false).find("access-control-allow-origin: https://app.example"),
            std::string::npos);
  EXPECT_NE(post("https://app.example", true).find("access-control-allow-origin: https://app.example"),
            std::string::npos)
      << "SSE";
  EXPECT_EQ(post("https://evil.example", false).find("access-control-allow-origin"), std::string::npos);
  // An error reply to an allowed origin carries it too, so the page can read the error.
  const auto [denied, unused] = split_reply(raw_response(
      port, "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\nOrigin: https://app.example\r\n\r\n"));
  EXPECT_EQ(denied.compare(0, 12, "http/1.1 401"), 0) << denied;
  EXPECT_NE(denied.find("access-control-allow-origin: https://app.example"), std::string::npos) << denied;
}

// Expect: 100-continue is answered once the headers pass, before the client sends its body
// (curl waits a second for it with bodies over 1 MiB); a refused request gets its answer instead.
TEST_F(Server, ExpectContinueIsAnswered) {
  ServerConfig cfg;
  cfg.api_keys = {"key-a"};
  start(cfg);
  const std::string body = R"({"content": "hello"})";
  const auto head = [&](const std::string& key) {
    return "POST /tokenize HTTP/1.1\r\nHost: x\r\nConnection: close\r\nExpect: 100-continue\r\nAuthorization: Bearer " +
           key + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  };
  net::io_context ioc;
  tcp::socket socket(ioc);
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), uint16_t(port)));
  net::write(socket, net::buffer(head("key-a")));
  std::string interim(25, '\0');
  net::read(socket, net::buffer(interim));  // no body sent yet: only the interim reply can come
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  net::write(socket, net::buffer(body));
  std::string reply;
  std::array<char, 4096> buf;
  beast::error_code ec;
  for (size_t n; (n = socket.read_some(net::buffer(buf), ec)) > 0 || !ec;) reply.append(buf.data(), n);
  EXPECT_EQ(reply.compare(0, 12, "HTTP/1.1 200"), 0) << reply;
  // A wrong key: the final 401 comes instead of 100 Continue.
  EXPECT_EQ(raw_exchange(port, head("wrong")), 401);
}

// A client that half-closes after its request, or sends a stray byte while it waits, still
// gets its reply (the disconnect watcher used to take either for a disconnect).
TEST_F(Server, HalfCloseAndStrayBytesStillGetTheReply) {
  start();
  const std::string body = R"({"prompt": "Once upon a time", "max_tokens": 32, "ignore_eos": true})";
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  EXPECT_EQ(raw_exchange(port, req, /*half_close=*/true), 200);
  const std::string closing = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body;
  EXPECT_EQ(raw_exchange(port, closing, false, "x", api.get()), 200);
  // Pipelined while generating: the next request is kept and answered after the first.
  const std::string both =
      raw_response(port, req, false, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", api.get());
  const size_t second = both.find("HTTP/1.1 ", 9);
  ASSERT_NE(second, std::string::npos) << both;
  EXPECT_EQ(both.compare(0, 12, "HTTP/1.1 200"), 0);
  EXPECT_EQ(both.compare(second, 12, "HTTP/1.1 200"), 0) << both.substr(second);
}

// Reads from `socket` until `marker` has arrived; returns everything read.
std::string read_until(tcp::socket& socket, const std::string& marker) {
  std::string got;
  std::array<char, 4096> buf;
  beast::error_code ec;
  while (got.find(marker) == std::string::npos) {
    const size_t n = socket.read_some(net::buffer(buf), ec);
    if (ec) break;
    got.append(buf.data(), n);
  }
  return got;
}

// Streams are chunked and keep the connection: a second request on it, sent once the first
// stream has ended, is answered (clients reuse connections; close-delimited streams could not).
// One access-log line per request: method, path, status, tokens, latency, and an id of the
// API key (never the key).
TEST_F(Server, AccessLogHasOneLinePerRequest) {
  const std::string path = ::testing::TempDir() + "/access.log";
  std::remove(path.c_str());
  ServerConfig cfg;
  cfg.access_log = path;
  cfg.api_keys = {"sk-secret-one"};
  start(cfg);
  const std::string key = "Bearer sk-secret-one";
  EXPECT_EQ(request(port, "POST", "/v1/chat/completions", chat("Hi", 5), key).status, 200);
  EXPECT_EQ(request(port, "POST", "/v1/chat/completions", chat("Hi", 4, true), key).status, 200);
  EXPECT_EQ(request(port, "GET", "/v1/models?x=1", "", "Bearer wrong").status, 401);
  EXPECT_EQ(request(port, "GET", "/nowhere", "", key).status, 404);
  server->stop();
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u) << (lines.empty() ? "" : lines[0] + "\n" + lines.back());
  const std::string id = api_key_id("sk-secret-one");
  EXPECT_EQ(id.size(), 12u);
  const std::regex shape(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[-+]\d\d:\d\d access method=\S+ path=\S+ status=\d+ )"
                         R"(prompt_tokens=\d+ completion_tokens=\d+ latency_ms=[0-9.]+ key=\S+ client=127\.0\.0\.1)"
                         R"(( model=\S+)?$)");
  for (const std::string& line : lines) {
    EXPECT_TRUE(std::regex_search(line, shape)) << line;
    EXPECT_EQ(line.find("secret"), std::string::npos) << line;
  }
  EXPECT_NE(lines[0].find("method=POST path=/v1/chat/completions status=200"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("completion_tokens=5 "), std::string::npos) << lines[0];
  EXPECT_EQ(lines[0].find("prompt_tokens=0 "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("key=" + id), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(" model=stories260K.gguf"), std::string::npos) << lines[0];  // the model that answered
  EXPECT_EQ(lines[2].find(" model="), std::string::npos) << lines[2];
  EXPECT_NE(lines[1].find("status=200 "), std::string::npos) << lines[1];  // streamed
  EXPECT_NE(lines[1].find(" model=stories260K.gguf"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("completion_tokens=4 "), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("method=GET path=/v1/models status=401"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("key=" + api_key_id("wrong")), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("path=/nowhere status=404"), std::string::npos) << lines[3];
}

TEST(ServerConfigRules, AccessLogThatCannotBeOpenedIsAStartUpError) {
  ServerConfig cfg;
  cfg.access_log = "/dev/null/access.log";
  ApiService api(cfg);
  HttpServer server(api, 1);
  auto started = server.start("127.0.0.1", 0);
  ASSERT_FALSE(started.is_ok());
  EXPECT_NE(started.message().find("access_log: cannot open '/dev/null/access.log'"), std::string::npos)
      << started.message();
}

// n choices: each its own seed (so they differ at temperature 1), indexed 0..n-1, usage
// summed as OpenAI does (the prompt once); the prompt is prefilled once: the later choices
// find it in the prefix cache. Streamed, every choice ends with its own finish chunk.
TEST_F(Server, NChoicesShareThePromptAndSumTheUsage) {
  start();
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "Once upon a time there was a little girl. ";
  json body = {{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 1.0}, {"seed", 7}, {"n", 3}};
  const double hits_before = metric(port, "autoglm_prefix_cache_hit_tokens_total");
  const Response r = request(port, "POST", "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.j();
  ASSERT_EQ(j["choices"].size(), 3u);
  std::set<std::string> texts;
  int64_t completion = 0;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["finish_reason"], "length");
    texts.insert(j["choices"][i]["text"].get<std::string>());
  }
  completion = j["usage"]["completion_tokens"];
  EXPECT_EQ(completion, 36);
  const int64_t prompt_tokens = j["usage"]["prompt_tokens"];
  EXPECT_GT(prompt_tokens, 100);
  EXPECT_EQ(j["usage"]["total_tokens"], prompt_tokens + 36);
  EXPECT_EQ(texts.size(), 3u) << "each choice has its own seed";
  // Choices 1 and 2 reused all but the last partial block of the prompt.
  const double hits = metric(port, "autoglm_prefix_cache_hit_tokens_total") - hits_before;
  EXPECT_GE(hits, 2.0 * double(prompt_tokens - 16)) << "prompt tokens " << prompt_tokens;
  // The same seed gives the same choices again; choice 0 equals an n=1 request with that seed.
  const json again = request(port, "POST", "/v1/completions", body.dump()).j();
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(again["choices"][i]["text"], j["choices"][i]["text"]);
  body["n"] = 1;
  EXPECT_EQ(request(port, "POST", "/v1/completions", body.dump()).j()["choices"][0]["text"], j["choices"][0]["text"]);
  // Streamed chat: deltas carry their choice's index; three finish chunks, then usage and [DONE].
  json chat_body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                    {"max_tokens", 6},
                    {"temperature", 1.0},
                    {"seed", 3},
                    {"n", 3},
                    {"stream", true},
                    {"stream_options", {{"include_usage", true}}}};
  const std::string stream = request(port, "POST", "/v1/chat/completions", chat_body.dump()).body;
  std::map<int, std::string> content;
  int finishes = 0;
  json usage;
  for (size_t at = 0; (at = stream.find("data: ", at)) != std::string::npos;) {
    const size_t end = stream.find("\n\n", at);
    const std::string data = stream.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") break;
    const json chunk = json::parse(data);
    if (!chunk["usage"].is_null() && chunk.contains("usage")) usage = chunk["usage"];
    for (const json& c : chunk["choices"]) {
      content[c["index"].get<int>()] += c["delta"].value("content", "");
      if (!c["finish_reason"].is_null()) ++finishes;
    }
  }
  EXPECT_EQ(content.size(), 3u);
  EXPECT_EQ(finishes, 3);
  EXPECT_EQ(usage["completion_tokens"], 18);
  expect_error(request(port, "POST", "/v1/completions", R"({"prompt": "x", "n": 0})"), 400, "n");
}

std::vector<float> floats_of(const json& v) {
  std::vector<float> out;
  for (const json& x : v) out.push_back(x.get<float>());
  return out;
}

std::vector<float> decode_base64_floats(const std::string& text) {
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    acc = (acc << 6) | uint32_t(alphabet.find(c));
    if ((bits += 6) >= 8) bytes += char((acc >> (bits -= 8)) & 0xff);
  }
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

// /v1/embeddings: every input form, batched inputs equal single ones, base64 equals float,
// `dimensions` truncates and normalises again; bad inputs are 400s naming the entry.
TEST_F(Server, EmbeddingsInEveryInputForm) {
  start();
  auto embed = [&](const json& body) {
    const Response r = request(port, "POST", "/v1/embeddings", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.j();
  };
  const json one = embed({{"input", "Once upon a time"}});
  ASSERT_EQ(one["data"].size(), 1u);
  const std::vector<float> v = floats_of(one["data"][0]["embedding"]);
  EXPECT_EQ(v.size(), 64u);  // stories260K: n_embd 64
  double norm = 0;
  for (float x : v) norm += double(x) * x;
  EXPECT_NEAR(norm, 1.0, 1e-5);
  EXPECT_EQ(one["object"], "list");
  EXPECT_EQ(one["data"][0]["object"], "embedding");
  EXPECT_GT(one["usage"]["prompt_tokens"].get<int>(), 2);
  const json many = embed({{"input", {"Lily went", "Once upon a time"}}});
  ASSERT_EQ(many["data"].size(), 2u);
  EXPECT_EQ(many["data"][1]["index"], 1);
  const std::vector<float> batched = floats_of(many["data"][1]["embedding"]);
  for (size_t j = 0; j < v.size(); ++j) EXPECT_NEAR(batched[j], v[j], 1e-5);
  const json ids = json::parse(request(port, "POST", "/tokenize", R"({"content": "Once upon a time"})").body);
  const json by_ids = embed({{"input", ids["tokens"]}});
  const json by_lists = embed({{"input", {ids["tokens"], ids["tokens"]}}});
  for (size_t j = 0; j < v.size(); ++j) {
    EXPECT_NEAR(by_ids["data"][0]["embedding"][j].get<float>(), v[j], 1e-5);
    EXPECT_NEAR(by_lists["data"][1]["embedding"][j].get<float>(), v[j], 1e-5);
  }
  const json b64 = embed({{"input", "Once upon a time"}, {"encoding_format", "base64"}});
  EXPECT_EQ(decode_base64_floats(b64["data"][0]["embedding"]), v);
  const json cut = embed({{"input", "Once upon a time"}, {"dimensions", 16}});
  const std::vector<float> c = floats_of(cut["data"][0]["embedding"]);
  ASSERT_EQ(c.size(), 16u);
  double head = 0;
  for (size_t j = 0; j < 16; ++j) head += double(v[j]) * v[j];
  for (size_t j = 0; j < 16; ++j) EXPECT_NEAR(c[j], v[j] / std::sqrt(head), 1e-5);
  // Mean pooling is another vector.
  expect_error(request(port, "POST", "/v1/embeddings", "{}"), 400, "input");
  expect_error(request(port, "POST", "/v1/embeddings", R"({"input": ["a", 3]})"), 400, "input[1]");
  expect_error(request(port, "POST", "/v1/embeddings", R"({"input": [[1, 2], [1, 999999]]})"), 400, "input[1]");
  expect_error(request(port, "POST", "/v1/embeddings", R"({"input": ""})"), 400, "input");
  expect_error(request(port, "POST", "/v1/embeddings", R"({"input": "a", "dimensions": 65})"), 400, "dimensions");
  expect_error(request(port, "POST", "/v1/embeddings", R"({"input": "a", "encoding_format": "hex"})"), 400,
               "encoding_format");
}

TEST_F(Server, EmbeddingsPoolingFollowsTheConfig) {
  ServerConfig mean;
  mean.embeddings_pooling = Pooling::kMean;
  start(mean);
  const json m = json::parse(request(port, "POST", "/v1/embeddings", R"({"input": "Once upon a time"})").body);
  server->stop();
  server.reset();
  api.reset();
  start();
  const json last = json::parse(request(port, "POST", "/v1/embeddings", R"({"input": "Once upon a time"})").body);
  EXPECT_NE(m["data"][0]["embedding"], last["data"][0]["embedding"]);
  EXPECT_FALSE(parse_server_config("embeddings_pooling: max\n", "t.yaml").is_ok());
}

// The events of a Responses stream, in order.
std::vector<json> response_events(const std::string& stream) {
  std::vector<json> events;
  for (size_t at = 0; (at = stream.find("\ndata: ", at)) != std::string::npos;) {
    const size_t end = stream.find("\n\n", at + 1);
    events.push_back(json::parse(stream.substr(at + 7, end - at - 7)));
    at = end;
  }
  return events;
}

// The Responses API: input and instructions, a stored response found by GET (only with its
// key) and continued by previous_response_id (whose KV comes from the prefix cache), the
// standard stream events, function calls as items, DELETE, and errors naming Responses fields.
TEST_F(Server, ResponsesCreateStoreContinueAndStream) {
  AUTOGLM_REQUIRE_SHARED("models/hf/qwen2-tiny/config.json");
  ServerConfig cfg;
  cfg.model = test::shared_path("models/hf/qwen2-tiny");
  cfg.api_keys = {"key-a", "key-b"};
  start(cfg);
  const std::string a = "Bearer key-a", b = "Bearer key-b";
  std::string long_input;
  for (int i = 0; i < 8; ++i) long_input += "The quick brown fox jumps over the lazy dog. ";
  json body = {
      {"input", long_input}, {"instructions", "Answer briefly."}, {"max_output_tokens", 6}, {"temperature", 0}};
  const Response first = request(port, "POST", "/v1/responses", body.dump(), a);
  ASSERT_EQ(first.status, 200) << first.body;
  const json r1 = first.j();
  EXPECT_EQ(r1["object"], "response");
  EXPECT_EQ(r1["status"], "incomplete");
  EXPECT_EQ(r1["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r1["output"][0]["type"], "message");
  EXPECT_EQ(r1["output"][0]["content"][0]["type"], "output_text");
  EXPECT_EQ(r1["usage"]["output_tokens"], 6);
  const int64_t input_tokens = r1["usage"]["input_tokens"];
  EXPECT_GT(input_tokens, 80);
  const std::string id = r1["id"];
  EXPECT_EQ(request(port, "GET", "/v1/responses/" + id, "", a).j()["id"], id);
  EXPECT_EQ(request(port, "GET", "/v1/responses/" + id, "", b).status, 404);  // another key's
  // The continuation: the stored conversation comes first, its KV from the prefix cache.
  json next = {{"input", "And then?"},
               {"instructions", "Answer briefly."},  // not carried over, as OpenAI does
               {"previous_response_id", id},
               {"max_output_tokens", 4},
               {"temperature", 0}};
  const json r2 = request(port, "POST", "/v1/responses", next.dump(), a).j();
  EXPECT_EQ(r2["previous_response_id"], id);
  EXPECT_GT(r2["usage"]["input_tokens"].get<int64_t>(), input_tokens);
  EXPECT_GE(r2["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>(), input_tokens - 16) << r2["usage"];
  EXPECT_EQ(request(port, "POST", "/v1/responses", next.dump(), b).status, 404);
  // Streamed: created, in_progress, item added, part added, deltas, done events, completed.
  body["stream"] = true;
  const std::vector<json> events = response_events(request(port, "POST", "/v1/responses", body.dump(), a).body);
  ASSERT_GE(events.size(), 8u);
  EXPECT_EQ(events[0]["type"], "response.created");
  EXPECT_EQ(events[1]["type"], "response.in_progress");
  EXPECT_EQ(events[2]["type"], "response.output_item.added");
  EXPECT_EQ(events[3]["type"], "response.content_part.added");
  std::string text;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["sequence_number"], i);
    if (events[i]["type"] == "response.output_text.delta") text += events[i]["delta"].get<std::string>();
  }
  EXPECT_EQ(events.back()["type"], "response.incomplete");
  EXPECT_EQ(text, events.back()["response"]["output"][0]["content"][0]["text"]);
  EXPECT_EQ(text, r1["output"][0]["content"][0]["text"]);  // greedy: the same as unstreamed
  // A forced function call is a function_call item with its arguments.
  json call = {{"input", "Weather in Paris?"},
               {"tools",
                {{{"type", "function"},
                  {"name", "get_weather"},
                  {"parameters",
                   {{"type", "object"},
                    {"properties", {{"city", {{"type", "string"}, {"maxLength", 8}}}}},
                    {"required", {"city"}}}}}}},
               {"tool_choice", "required"},
               {"temperature", 0},
               {"max_output_tokens", 60}};
  const json r3 = request(port, "POST", "/v1/responses", call.dump(), a).j();
  ASSERT_FALSE(r3["output"].empty()) << r3.dump();
  const json& fc = r3["output"].back();
  EXPECT_EQ(fc["type"], "function_call") << r3.dump();
  EXPECT_EQ(fc["name"], "get_weather");
  EXPECT_TRUE(json::parse(fc["arguments"].get<std::string>()).contains("city"));
  // Its output continues the conversation as a tool message.
  json answer = {{"previous_response_id", r3["id"]},
                 {"input", {{{"type", "function_call_output"}, {"call_id", fc["call_id"]}, {"output", "sunny"}}}},
                 {"max_output_tokens", 3}};
  EXPECT_EQ(request(port, "POST", "/v1/responses", answer.dump(), a).status, 200);
  EXPECT_EQ(request(port, "DELETE", "/v1/responses/" + id, "", a).j()["deleted"], true);
  EXPECT_EQ(request(port, "GET", "/v1/responses/" + id, "", a).status, 404);
  expect_error(request(port, "POST", "/v1/responses", R"({"input": 3})", a), 400, "input");
  expect_error(request(port, "POST", "/v1/responses", R"({"input": "x", "max_output_tokens": 0})", a), 400,
               "max_output_tokens");
  expect_error(request(port, "POST", "/v1/responses", R"({"input": [{"type": "web_search_call"}]})", a), 400,
               "input[0].type");
  expect_error(request(port, "POST", "/v1/responses", R"({"input": "x", "tools": [{"type": "web_search"}]})", a), 400,
               "tools[0].type");
  expect_error(request(port, "POST", "/v1/responses", R"({"input": "x", "previous_response_id": "resp_nope"})", a), 404,
               "previous_response_id");
}

TEST_F(Server, StreamsAreChunkedAndKeepTheConnection) {
  start();
  const std::string body = R"({"prompt": "Once upon a time", "max_tokens": 8, "stream": true})";
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  net::io_context ioc;
  tcp::socket socket(ioc);
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), uint16_t(port)));
  for (int round = 0; round < 3; ++round) {
    net::write(socket, net::buffer(req));
    const std::string reply = read_until(socket, "\r\n0\r\n\r\n");
    const auto [head, chunked] = split_reply(reply);
    EXPECT_NE(head.find("transfer-encoding: chunked"), std::string::npos) << head;
    EXPECT_EQ(head.find("connection: close"), std::string::npos) << head;
    // Undo the chunking: the events end with [DONE].
    std::string events;
    for (size_t at = 0;;) {
      const size_t eol = chunked.find("\r\n", at);
      ASSERT_NE(eol, std::string::npos);
      const size_t size = std::stoul(chunked.substr(at, eol - at), nullptr, 16);
      if (size == 0) break;
      events += chunked.substr(eol + 2, size);
      at = eol + 2 + size + 2;
    }
    EXPECT_NE(events.find("data: [DONE]\n\n"), std::string::npos) << events;
  }
}

TEST_F(Server, MalformedFramingEndsOnlyThatConnection) {
  start(ServerConfig());
  const std::string big(70000, 't');
  EXPECT_EQ(raw_exchange(port, chunked_tokenize("13", "")), 200);                      // the well-formed request
  EXPECT_EQ(raw_exchange(port, chunked_tokenize("13", "X-T: " + big + "\r\n")), 431);  // trailer field
  EXPECT_EQ(raw_exchange(port, chunked_tokenize("13", "X-T: " + big.substr(0, 40000) + "\r\n")), 431);
  EXPECT_EQ(raw_exchange(port, chunked_tokenize("13;ext=" + big, "")), 431);                 // chunk extension
  EXPECT_EQ(raw_exchange(port, chunked_tokenize("zz", "")), 400);                            // chunk size
  EXPECT_EQ(raw_exchange(port, chunked_tokenize("fffffffffffffffffffff", "")), 400);         // size overflow
  EXPECT_EQ(raw_exchange(port, chunked_tokenize("13", "", "Content-Length: 19\r\n")), 400);  // TE and CL
  EXPECT_EQ(raw_exchange(port, "GET /health HTTP/1.1\r\nX-H: " + std::string(20000, 'h') + "\r\n\r\n"), 431);
  // A healthy client is still served, and so is /tokenize.
  EXPECT_EQ(request(port, "GET", "/health").status, 200);
  EXPECT_EQ(request(port, "POST", "/tokenize", R"({"content": "hello"})").status, 200);
}

// 10^5 levels of nesting in any field of any JSON route: a 400, and the server serves on.
TEST_F(Server, DeepJsonIsA400OnEveryRoute) {
  start(ServerConfig());
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string deep_object = [] {
    std::string s;
    for (int i = 0; i < 100000; ++i) s += "{\"a\":";
    return s + "1" + std::string(100000, '}');
  }();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi", "extra": )" + deep + "}]}"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}], "response_format": )" + deep_object + "}"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": )" + deep_object + "}"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "tool_choice": )" + deep + "}"},
      {"/v1/completions", R"({"prompt": )" + deep + "}"},
      {"/tokenize", R"({"content": "x", "extra": )" + deep_object + "}"},
      {"/detokenize", R"({"tokens": )" + deep + "}"},
      {"/v1/tasks", R"({"input": "x", "extra": )" + deep + "}"},
  };
  for (const auto& [route, body] : cases) {
    const Response r = request(port, "POST", route, body);
    expect_error(r, 400, "");
    EXPECT_NE(r.body.find("deeper than 128 levels"), std::string::npos) << route << ": " << r.body;
  }
  // Nesting well inside the bound is fine.
  const std::string nested = std::string(100, '[') + std::string(100, ']');
  EXPECT_EQ(request(port, "POST", "/v1/chat/completions",
                    R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "metadata": )" + nested + "}")
                .status,
            200);
  EXPECT_EQ(request(port, "GET", "/health").status, 200);
}

// Every configured limit is applied to requests, and its error names the field and the limit.
TEST_F(Server, ConfiguredLimitsAreAppliedAndNamed) {
  ServerConfig cfg;
  cfg.runtime.limits.json_depth = 8;
  cfg.runtime.limits.json_object_keys = 64;
  cfg.runtime.limits.prompt_tokens = 120;
  cfg.runtime.limits.stop_strings = 2;
  cfg.runtime.limits.stop_string_bytes = 8;
  cfg.runtime.limits.top_logprobs = 3;
  cfg.runtime.limits.grammar_bytes = 2048;
  cfg.runtime.limits.grammar_symbols = 500;
  cfg.runtime.limits.grammar_stacks = 64;
  cfg.runtime.limits.template_steps = 1000;
  cfg.runtime.limits.template_output_bytes = 16384;
  start(cfg);
  const auto refused = [&](const char* route, const json& body, const std::string& param, const std::string& limit) {
    const Response r = request(port, "POST", route, body.dump());
    expect_error(r, 400, param);
    EXPECT_NE(r.body.find("limit " + limit), std::string::npos) << r.body;
  };
  const json hi = {{"role", "user"}, {"content", "hi"}};
  const json chat = {{"messages", {hi}}, {"max_tokens", 2}};
  const auto with = [](json body, const char* key, json value) {
    body[key] = std::move(value);
    return body;
  };
  json nested = 1;
  for (int i = 0; i < 9; ++i) nested = json::array({nested});
  refused("/v1/chat/completions", with(chat, "metadata", nested), "", "json_depth");
  json wide = json::object();
  for (int i = 0; i < 65; ++i) {
    std::string key = "k";
    key += std::to_string(i);
    wide[key] = i;
  }
  refused("/v1/chat/completions", with(chat, "metadata", wide), "", "json_object_keys");
  EXPECT_NE(request(port, "POST", "/v1/chat/completions", with(chat, "metadata", wide).dump())
                .body.find("the body has an object with more than 64 keys"),
            std::string::npos);
  std::string words;
  for (int i = 0; i < 60; ++i) words += " once upon a time";
  refused("/v1/completions", {{"prompt", words}}, "prompt", "prompt_tokens");
  refused("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", words}}}}}, "messages",
          "prompt_tokens");
  refused("/v1/chat/completions", with(chat, "stop", {"a", "b", "c"}), "stop", "stop_strings");
  refused("/v1/chat/completions", with(chat, "stop", {"123456789"}), "stop", "stop_string_bytes");
  refused("/v1/chat/completions", with(with(chat, "logprobs", true), "top_logprobs", 4), "top_logprobs",
          "top_logprobs");
  refused("/v1/chat/completions", with(chat, "grammar", "root ::= \"a\" # " + std::string(3000, 'x')), "grammar",
          "grammar_bytes");
  refused("/v1/chat/completions", with(chat, "grammar", "root ::= \"a\"{0,400}"), "grammar", "grammar_symbols");
  std::string alternatives = "root ::= a0\n";
  for (int k = 0; k < 8; ++k) {
    const std::string next = "a" + std::to_string(k + 1);
    alternatives += "a" + std::to_string(k) + " ::= " + next + " \"0\" | " + next + " \"1\"\n";
  }
  alternatives += "a8 ::= \"x\"\n";
  refused("/v1/chat/completions", with(chat, "grammar", alternatives), "grammar", "grammar_stacks");
  json many = json::array();
  for (int i = 0; i < 2000; ++i) many.push_back(hi);
  refused("/v1/chat/completions", with(chat, "messages", many), "messages", "template_steps");
  refused("/v1/chat/completions", with(chat, "messages", {{{"role", "user"}, {"content", std::string(20000, 'a')}}}),
          "messages", "template_output_bytes");
  // Within every limit, the request is served.
  json fine = with(with(with(chat, "stop", {"12345678", "b"}), "logprobs", true), "top_logprobs", 3);
  fine["grammar"] = "root ::= [a-z]{1,20}";
  const Response ok = request(port, "POST", "/v1/chat/completions", fine.dump());
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST_F(Server, LoadingAnswers503) {
  start(ServerConfig(), /*load=*/false);
  expect_error(request(port, "GET", "/health"), 503, "");
  expect_error(request(port, "POST", "/v1/chat/completions", chat("hi", 1)), 503, "");
  ASSERT_TRUE(api->load().is_ok());
  EXPECT_EQ(request(port, "GET", "/health").status, 200);
}

// A prompt the limits refuse is refused from its length, or from what has been encoded of it,
// never encoded whole (four 6.8 MB prompts held the preparation workers for 30 s): the error
// says "at least" and names the bound.
TEST_F(Server, PromptsOverTheLimitsAreRefusedBeforeTheyAreEncodedWhole) {
  ServerConfig cfg;
  cfg.runtime.limits.prompt_tokens = 100;
  start(cfg);
  std::string text;
  while (text.size() < 200000) text += "Once upon a time there was a little girl. ";
  const auto refused = [&](const char* route, const json& body, const char* param, const std::string& bound) {
    const Response r = request(port, "POST", route, body.dump());
    expect_error(r, 400, param);
    EXPECT_NE(r.body.find("at least"), std::string::npos) << "encoded whole: " << r.body;
    EXPECT_NE(r.body.find(bound), std::string::npos) << r.body;
  };
  refused("/v1/completions", {{"prompt", text}, {"max_tokens", 1}}, "prompt", "limit prompt_tokens");
  refused("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", 1}},
          "messages", "limit prompt_tokens");
  // Just over the limit: refused naming it, as before.
  const Response near =
      request(port, "POST", "/v1/completions", json{{"prompt", text.substr(0, 600)}, {"max_tokens", 1}}.dump());
  expect_error(near, 400, "prompt");
  EXPECT_NE(near.body.find("limit prompt_tokens"), std::string::npos) << near.body;
  server.reset();
  cfg.runtime.limits.prompt_tokens = 0;  // the context window is the bound
  start(cfg);
  refused("/v1/completions", {{"prompt", text}, {"max_tokens", 1}}, "prompt", "context window");
}

TEST_F(Server, BadInputGetsItsStatus) {
  ServerConfig cfg;
  cfg.max_body_bytes = 64 * 1024;
  cfg.runtime.context_window = 256;
  start(cfg);
  expect_error(request(port, "POST", "/v1/chat/completions", "{not json"), 400, "");
  expect_error(request(port, "POST", "/v1/chat/completions", R"({"messages": "hi"})"), 400, "messages");
  expect_error(request(port, "POST", "/v1/chat/completions", R"({"messages": [{"role": "user", "content": 5}]})"), 400,
               "messages[0].content");
  expect_error(request(port, "POST", "/v1/completions", R"({"prompt": "x", "max_tokens": "ten"})"), 400, "max_tokens");
  expect_error(request(port, "POST", "/v1/completions", R"({"prompt": "x", "top_p": 7})"), 400, "top_p");
  expect_error(request(port, "POST", "/v1/completions", R"({"prompt": "x", "stop": [1]})"), 400, "stop");
  // A field of the wrong type where a string was read with a default used to throw (a 500).
  expect_error(request(port, "POST", "/v1/chat/completions",
                       R"({"messages": [{"role": "user", "content": [{"type": 5, "text": "x"}]}]})"),
               400, "messages[0].content");
  expect_error(request(port, "POST", "/v1/chat/completions",
                       R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema",
                           "json_schema": {"schema": {"type": "string", "nullable": 1}}}})"),
               400, "response_format.json_schema.schema");
  // Issue 37: a pattern whose automaton took seconds and 800 MB to build is refused within its
  // work budget, naming the schema path.
  const Response bomb = request(port, "POST", "/v1/chat/completions",
                                R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type":
                                    "json_schema", "json_schema": {"schema": {"type": "string",
                                    "pattern": "^(c{1,100}){1,100}$"}}}})");
  expect_error(bomb, 400, "response_format.json_schema.schema");
  EXPECT_NE(bomb.body.find("schema at #: 'pattern': pattern needs more than 4000000 steps"), std::string::npos)
      << bomb.body;
  // Found by fuzz_request_json: a number too large for a double is a 400 like any bad JSON.
  expect_error(request(port, "POST", "/v1/completions", R"({"prompt": "x", "temperature": 3E3333})"), 400, "");
  expect_error(request(port, "POST", "/v1/completions", R"({"prompt": "x", "priority": "vip"})"), 400, "priority");
  // Invalid UTF-8, raw and as a broken two-byte sequence.
  const Response raw = request(port, "POST", "/v1/completions", "{\"prompt\": \"\xff\xfe\"}");
  expect_error(raw, 400, "");
  EXPECT_NE(raw.body.find("UTF-8"), std::string::npos) << raw.body;
  expect_error(request(port, "POST", "/v1/completions", "{\"prompt\": \"a\xc3\x28\"}"), 400, "");
  expect_error(request(port, "POST", "/v1/completions", json{{"prompt", std::string(20000, 'a')}}.dump()), 400,
               "prompt");
  expect_error(request(port, "POST", "/v1/completions", json{{"prompt", std::string(100000, 'a')}}.dump()), 413, "");
  expect_error(request(port, "POST", "/v1/completions", R"({"prompt": "x", "model": "gpt-4"})"), 404, "model");
  expect_error(request(port, "GET", "/v1/nothing"), 404, "");
  expect_error(request(port, "GET", "/v1/chat/completions"), 405, "");
  // The server still serves.
  const Response ok = request(port, "POST", "/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 4})");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_GE(metric(port, "autoglm_http_responses_total{code=\"400\"}"), 0);
}

TEST_F(Server, ThousandIdleConnectionsDoNotBlockOthers) {
  start(ServerConfig());
  net::io_context ioc;
  std::vector<std::unique_ptr<tcp::socket>> idle;
  for (int i = 0; i < 1000; ++i) {
    auto s = std::make_unique<tcp::socket>(ioc);
    beast::error_code ec;
    s->connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), uint16_t(port)), ec);
    if (ec) break;  // the test process's own descriptor limit
    idle.push_back(std::move(s));
  }
  EXPECT_GE(idle.size(), 900u);
  const Response r = request(port, "POST", "/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 8})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j()["usage"]["completion_tokens"], 8);
}

TEST_F(Server, ApiKeysAreChecked) {
  ServerConfig cfg;
  cfg.api_keys = {"sk-test"};
  start(cfg);
  expect_error(request(port, "POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 1})"), 401, "");
  expect_error(request(port, "POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 1})", "Bearer nope"), 401, "");
  EXPECT_EQ(request(port, "POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 1})", "Bearer sk-test").status,
            200);
  EXPECT_EQ(request(port, "GET", "/health").status, 200);  // health needs no key
}

// On a keyed server, which routes exist is told only to a caller with a key: an unknown route or a
// wrong method without one is a 401, as any other request.
TEST_F(Server, UnknownRoutesAndMethodsNeedTheKeyFirst) {
  ServerConfig cfg;
  cfg.api_keys = {"sk-test"};
  start(cfg);
  expect_error(request(port, "GET", "/v1/no-such-route"), 401, "");
  expect_error(request(port, "GET", "/v1/chat/completions"), 401, "");
  expect_error(request(port, "GET", "/v1/no-such-route", "", "Bearer sk-test"), 404, "");
  expect_error(request(port, "GET", "/v1/chat/completions", "", "Bearer sk-test"), 405, "");
  EXPECT_EQ(request(port, "GET", "/ready").status, 200);  // the probes need no key
}

TEST_F(Server, FullQueueAnswers429WithRetryAfter) {
  ServerConfig cfg;
  cfg.runtime.max_queued = 1;
  start(cfg);
  // A long streaming request holds the only slot while we ask again.
  net::io_context ioc;
  beast::tcp_stream held(ioc);
  held.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), uint16_t(port)));
  http::request<http::string_body> req(http::verb::post, "/v1/completions", 11);
  req.body() = R"({"prompt": "Once upon a time", "max_tokens": 1500, "stream": true})";
  req.prepare_payload();
  http::write(held, req);
  char buf[256];
  held.socket().read_some(net::buffer(buf));  // the stream has started
  const Response r = request(port, "POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 1})");
  expect_error(r, 429, "");
  EXPECT_EQ(r.retry_after, "1");
}

// One key cannot learn whether another key's prompt is cached: cached prefixes are scoped per
// API key (and per cache_salt); prefix_cache_per_key: false shares them.
TEST_F(Server, CachedPrefixesAreScopedPerKey) {
  for (bool per_key : {true, false}) {
    ServerConfig cfg;
    cfg.api_keys = {"key-a", "key-b"};
    cfg.prefix_cache_per_key = per_key;
    start(cfg);
    const std::string prompt = chat("Tell me a story about a girl named Lily who finds a red ball in the park.", 4);
    const auto cached = [&](const std::string& key, const std::string& body) {
      const Response r = request(port, "POST", "/v1/chat/completions", body, "Bearer " + key);
      EXPECT_EQ(r.status, 200) << r.body;
      return int(r.j()["usage"]["prompt_tokens_details"]["cached_tokens"]);
    };
    EXPECT_EQ(cached("key-a", prompt), 0);
    EXPECT_GT(cached("key-a", prompt), 0) << "the same key reuses its prefix";
    if (per_key) {
      EXPECT_EQ(cached("key-b", prompt), 0) << "another key sees nothing of key-a's cache";
    } else {
      EXPECT_GT(cached("key-b", prompt), 0) << "shared across keys when configured";
    }
    json salted = json::parse(prompt);
    salted["cache_salt"] = "tenant-7";
    EXPECT_EQ(cached("key-a", salted.dump()), 0) << "a new cache_salt starts a new chain";
    EXPECT_GT(cached("key-a", salted.dump()), 0);
    server->stop();
  }
}

TEST_F(Server, SecondTurnReportsCachedTokens) {
  start(ServerConfig());
  const std::string user1 = "Tell me a story about a girl named Lily who finds a red ball in the park.";
  const Response t1 = request(port, "POST", "/v1/chat/completions", chat(user1, 40));
  ASSERT_EQ(t1.status, 200) << t1.body;
  const json j1 = t1.j();
  const std::string answer = j1["choices"][0]["message"]["content"];
  const json turn2 = {{"messages",
                       {{{"role", "user"}, {"content", user1}},
                        {{"role", "assistant"}, {"content", answer}},
                        {{"role", "user"}, {"content", "And then?"}}}},
                      {"max_tokens", 8},
                      {"temperature", 0}};
  const Response t2 = request(port, "POST", "/v1/chat/completions", turn2.dump());
  ASSERT_EQ(t2.status, 200) << t2.body;
  const int cached = t2.j()["usage"]["prompt_tokens_details"]["cached_tokens"];
  const int turn1_tokens = int(j1["usage"]["prompt_tokens"]) + int(j1["usage"]["completion_tokens"]);
  // The template closes turn 1 with an end-of-turn marker the model never generated,
  // so the reusable prefix is turn 1's prompt plus its answer, minus one block.
  EXPECT_GE(cached, turn1_tokens - 16 - 8) << t2.body;
  EXPECT_GE(metric(port, "autoglm_prefix_cache_hit_tokens_total"), cached);
}

TEST_F(Server, DisconnectedStreamFreesItsBlocks) {
  ServerConfig cfg;
  cfg.runtime.context_window = 32768;  // a stream long enough to be running when the client is found gone
  start(cfg);
  const double baseline = metric(port, "autoglm_kv_blocks_used");
  EXPECT_EQ(baseline, 0);
  {
    net::io_context ioc;
    beast::tcp_stream s(ioc);
    s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), uint16_t(port)));
    http::request<http::string_body> req(http::verb::post, "/v1/chat/completions", 11);
    // Past EOS, so the stream is still running when the client leaves however fast the engine is.
    json body = json::parse(chat("Once upon a time", 30000, true));
    body["ignore_eos"] = true;
    req.body() = body.dump();
    req.prepare_payload();
    http::write(s, req);
    char buf[512];
    s.socket().read_some(net::buffer(buf));
  }  // the client goes away as soon as the stream has started (a finished-reason of "cancelled" below
     // shows the request still held its blocks then)
  // The closed connection is found when the stream's next write fails (a FIN alone could be
  // a half-close): the request is cancelled and its blocks return.
  double used = -1, cancelled = 0;
  test::wait_until([&] {
    used = metric(port, "autoglm_kv_blocks_used");
    cancelled = metric(port, "autoglm_requests_total{finish_reason=\"cancelled\"}");
    return used == baseline && cancelled >= 1;
  });
  EXPECT_EQ(used, baseline) << "the blocks never came back";
  EXPECT_GE(cancelled, 1) << "the stream was never cancelled";
}

// A client that keeps its connection but stops reading: the stream's writes stay pending, and
// after stream_write_timeout_s the request is cancelled and its blocks freed (before: it held them
// until all 30000 tokens were generated into a buffer nobody read).
TEST_F(Server, AStreamWhoseClientStopsReadingIsCancelled) {
  ServerConfig cfg;
  cfg.runtime.context_window = 32768;
  cfg.stream_write_timeout_s = 0.2;
  start(cfg);
  const double baseline = metric(port, "autoglm_kv_blocks_used");
  net::io_context ioc;
  tcp::socket s(ioc);
  s.open(tcp::v4());
  s.set_option(net::socket_base::receive_buffer_size(4096));  // full after a few chunks
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), uint16_t(port)));
  http::request<http::string_body> req(http::verb::post, "/v1/chat/completions", 11);
  json body = json::parse(chat("Once upon a time", 30000, true));
  body["ignore_eos"] = true;
  body["logprobs"] = true;
  body["top_logprobs"] = 20;  // about 2 KB per token: the buffers fill within the first hundred
  req.body() = body.dump();
  req.prepare_payload();
  http::write(s, req);  // and never a read
  double used = -1, cancelled = 0;
  test::wait_until([&] {
    used = metric(port, "autoglm_kv_blocks_used");
    cancelled = metric(port, "autoglm_requests_total{finish_reason=\"cancelled\"}");
    return used == baseline && cancelled >= 1;
  });
  EXPECT_GE(cancelled, 1) << "the stream was never cancelled";
  EXPECT_EQ(used, baseline) << "the blocks never came back";
}

// The response cache: a repeated deterministic request is answered from it (same text, usage
// and chunk shapes, streamed or not); a request can bypass it; sampling without a seed never
// uses it; the byte bound evicts; /metrics counts it all.
std::string content_of_stream(const std::string& body) {
  std::string text;
  for (size_t at = 0; (at = body.find("data: {", at)) != std::string::npos; ++at) {
    const json chunk = json::parse(body.substr(at + 6, body.find('\n', at) - at - 6));
    if (!chunk["choices"].empty() && chunk["choices"][0]["delta"].contains("content"))
      text += chunk["choices"][0]["delta"]["content"].get<std::string>();
  }
  return text;
}

TEST_F(Server, ResponseCacheAnswersRepeatedDeterministicRequests) {
  ServerConfig cfg;
  cfg.response_cache.enabled = true;
  cfg.response_cache.max_bytes = 64 * 1024;
  start(cfg);
  const Response first = request(port, "POST", "/v1/chat/completions", chat("Tell me a story", 24));
  const Response again = request(port, "POST", "/v1/chat/completions", chat("Tell me a story", 24));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.cache, "miss");
  EXPECT_EQ(again.cache, "hit");
  EXPECT_EQ(again.j()["choices"], first.j()["choices"]);
  EXPECT_EQ(again.j()["usage"], first.j()["usage"]);
  EXPECT_NE(again.j()["id"], first.j()["id"]);  // a reply of its own
  const Response streamed = request(port, "POST", "/v1/chat/completions", chat("Tell me a story", 24, true));
  EXPECT_EQ(streamed.cache, "hit");
  EXPECT_EQ(content_of_stream(streamed.body), first.j()["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_NE(streamed.body.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(metric(port, "autoglm_response_cache_hits_total"), 2);
  // Bypassed on request: by the body or by the header.
  json no = json::parse(chat("Tell me a story", 24));
  no["cache"] = false;
  EXPECT_EQ(request(port, "POST", "/v1/chat/completions", no.dump()).cache, "");
  EXPECT_EQ(request(port, "POST", "/v1/chat/completions", chat("Tell me a story", 24), "", "no-cache").cache, "");
  // Sampling without a seed: never cached; with a seed it is deterministic, so cached.
  json sampled = json::parse(chat("Tell me a story", 24));
  sampled["temperature"] = 0.9;
  EXPECT_EQ(request(port, "POST", "/v1/chat/completions", sampled.dump()).cache, "");
  EXPECT_EQ(request(port, "POST", "/v1/chat/completions", sampled.dump()).cache, "");
  sampled["seed"] = 5;
  const Response seeded = request(port, "POST", "/v1/chat/completions", sampled.dump());
  EXPECT_EQ(seeded.cache, "miss");
  EXPECT_EQ(request(port, "POST", "/v1/chat/completions", sampled.dump()).j()["choices"], seeded.j()["choices"]);
  // Another sampling parameter is another entry; the byte bound evicts the oldest.
  for (int i = 0; i < 40; ++i)
    request(port, "POST", "/v1/completions",
            json{{"prompt", "Once"}, {"max_tokens", 24 + i}, {"temperature", 0}}.dump());
  EXPECT_GT(metric(port, "autoglm_response_cache_evictions_total"), 0);
  EXPECT_LE(metric(port, "autoglm_response_cache_bytes"), 64 * 1024);
  EXPECT_GT(metric(port, "autoglm_response_cache_entries"), 0);
}

// The key is the request as prepared: whatever changes the output makes another entry (a miss,
// then a hit); what only changes the delivery (streaming, the user, a timeout) finds the first.
TEST_F(Server, ResponseCacheKeyCoversEveryOutputSetting) {
  ServerConfig cfg;
  cfg.response_cache.enabled = true;
  start(cfg);
  const json base = {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}};
  const auto cache_of = [&](const json& body) { return request(port, "POST", "/v1/completions", body.dump()).cache; };
  ASSERT_EQ(cache_of(base), "miss");
  const std::vector<json> changes = {{{"stop", {"zz"}}},
                                     {{"logit_bias", {{"300", 10}}}},
                                     {{"max_tokens", 7}},
                                     {{"logprobs", 2}},
                                     {{"n", 2}},
                                     {{"ignore_eos", true}},
                                     {{"frequency_penalty", 0.5}},
                                     {{"grammar", "root ::= \"a\"+"}},
                                     {{"speculative", false}}};
  for (const json& change : changes) {
    json body = base;
    body.update(change);
    EXPECT_EQ(cache_of(body), "miss") << change.dump();
    EXPECT_EQ(cache_of(body), "hit") << change.dump();
  }
  for (const json& delivery : {json{{"stream", true}}, json{{"user", "someone"}}, json{{"timeout", 30}}}) {
    json body = base;
    body.update(delivery);
    EXPECT_EQ(cache_of(body), "hit") << delivery.dump();
  }
  json bad = base;
  bad["cache"] = "yes";
  expect_error(request(port, "POST", "/v1/completions", bad.dump()), 400, "cache");
}

TEST_F(Server, ResponseCacheIsScopedPerApiKey) {
  ServerConfig cfg;
  cfg.response_cache.enabled = true;
  cfg.api_keys = {"key-a", "key-b"};
  start(cfg);
  const std::string body = chat("Tell me a story", 8);
  EXPECT_EQ(request(port, "POST", "/v1/chat/completions", body, "Bearer key-a").cache, "miss");
  EXPECT_EQ(request(port, "POST", "/v1/chat/completions", body, "Bearer key-a").cache, "hit");
  EXPECT_EQ(request(port, "POST", "/v1/chat/completions", body, "Bearer key-b").cache, "miss");  // not a's
}

TEST_F(Server, ResponseCacheFileSurvivesARestart) {
  const std::string path = ::testing::TempDir() + "/response_cache.sqlite";
  std::filesystem::remove(path);
  ServerConfig cfg;
  cfg.response_cache.enabled = true;
  cfg.response_cache.path = path;
  start(cfg);
  const Response first =
      request(port, "POST", "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 16}, {"temperature", 0}}.dump());
  ASSERT_EQ(first.cache, "miss");
  server->stop();
  server.reset();
  api.reset();
  start(cfg);  // a new server on the same file
  const Response again =
      request(port, "POST", "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 16}, {"temperature", 0}}.dump());
  EXPECT_EQ(again.cache, "hit");
  EXPECT_EQ(again.j()["choices"], first.j()["choices"]);
  EXPECT_EQ(again.j()["usage"], first.j()["usage"]);
  server->stop();
  server.reset();
  api.reset();
  {
    std::ofstream f(path, std::ios::trunc);
    f << "this is not a database, it only says so at length, past the sqlite header size of one hundred bytes.";
  }
  ApiService broken(cfg);
  const Status st = broken.load();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("response_cache.path: " + path), std::string::npos) << st.message();
}

TEST(ServerConfigResponseCache, KeysAreReadAndCheckedByName) {
  auto c =
      parse_server_config("response_cache: {enabled: true, max_entries: 10, max_bytes: 4096, ttl_s: 2}\n", "t.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_TRUE(c->response_cache.enabled);
  EXPECT_EQ(c->response_cache.max_entries, 10);
  EXPECT_EQ(c->response_cache.max_bytes, 4096);
  EXPECT_EQ(c->response_cache.ttl_s, 2);
  for (const char* bad :
       {"response_cache: {max_entries: 0}\n", "response_cache: {sqlite: x}\n", "response_cache: 1\n"}) {
    auto r = parse_server_config(bad, "t.yaml");
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("response_cache"), std::string::npos) << r.status().message();
  }
}

TEST(ResponseCacheStore, LruBytesAndTimeToLive) {
  ResponseCacheConfig cfg;
  cfg.enabled = true;
  cfg.max_entries = 2;
  auto entry = [](int64_t bytes) {
    CachedGeneration g;
    g.choices.resize(1);
    g.bytes = bytes;
    return g;
  };
  {
    ResponseCache cache(cfg);  // the default time to live (an hour): nothing expires here
    cache.insert("a", entry(10));
    cache.insert("b", entry(10));
    ASSERT_TRUE(cache.find("a"));  // a is now the most recent
    cache.insert("c", entry(10));  // evicts b
    EXPECT_FALSE(cache.find("b"));
    EXPECT_TRUE(cache.find("a") && cache.find("c"));
    EXPECT_NE(cache.render_metrics().find("autoglm_response_cache_evictions_total 1"), std::string::npos);
  }
  // A short time to live: found while it lasts (checked only when the find came in time to
  // tell, so a stalled machine cannot fail it), gone after; an expiry is not an eviction.
  using Clock = std::chrono::steady_clock;
  cfg.ttl_s = 0.05;
  ResponseCache cache(cfg);
  const Clock::time_point inserted = Clock::now();
  cache.insert("a", entry(10));
  const bool found = cache.find("a") != nullptr;
  if (Clock::now() - inserted < std::chrono::milliseconds(40)) {
    EXPECT_TRUE(found) << "expired before its time";
  }
  EXPECT_TRUE(test::wait_until([&] { return !cache.find("a"); })) << "never expired";
  EXPECT_NE(cache.render_metrics().find("autoglm_response_cache_evictions_total 0"), std::string::npos);
}

TEST_F(Server, TokenizeAndDetokenize) {
  start(ServerConfig());
  const Response t = request(port, "POST", "/tokenize", R"({"content": "Once upon a time"})");
  ASSERT_EQ(t.status, 200);
  EXPECT_EQ(t.j()["tokens"], json::parse("[1, 403, 407, 261, 378]"));
  const Response d = request(port, "POST", "/detokenize", R"({"tokens": [403, 407]})");
  EXPECT_EQ(d.j()["content"], " Once upon");
  expect_error(request(port, "POST", "/detokenize", R"({"tokens": [99999]})"), 400, "tokens");
}

// A Hugging Face folder's generation_config.json sets what a request leaves out: here
// do_sample false, so a request without a temperature decodes greedily.
TEST_F(Server, FolderGenerationConfigGivesTheDefaults) {
  const std::string src = "models/hf/qwen2-tiny";
  AUTOGLM_REQUIRE_SHARED(src + "/config.json");
  const std::string dir = test::temp_path("qwen2-greedy");
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer_config.json"})
    std::filesystem::copy_file(test::shared_path(src + "/" + f), dir + "/" + f,
                               std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(test::shared_path("models/hf-tokenizers/qwen3/tokenizer.json"), dir + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir + "/generation_config.json") << R"({"do_sample": false, "eos_token_id": [151645, 151643]})";
  ServerConfig cfg;
  cfg.model = dir;
  start(cfg);
  auto content = [&](const json& body) {
    const Response r = request(port, "POST", "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? r.j()["choices"][0]["message"]["content"].get<std::string>() : "";
  };
  const json messages = {{{"role", "user"}, {"content", "Hello there"}}};
  const std::string greedy = content({{"messages", messages}, {"max_tokens", 12}, {"temperature", 0}});
  EXPECT_EQ(content({{"messages", messages}, {"max_tokens", 12}, {"seed", 1}}), greedy);
  EXPECT_EQ(content({{"messages", messages}, {"max_tokens", 12}, {"seed", 2}}), greedy);
  // A request that sets its own temperature still samples.
  EXPECT_NE(content({{"messages", messages}, {"max_tokens", 12}, {"temperature", 2.0}, {"seed", 3}}), greedy);
}

ToolConfig echo_tool() {
  ToolConfig echo;
  echo.name = "echo";
  echo.description = "Repeat a message back";
  echo.parameters_json =
      R"({"type": "object", "properties": {"message": {"type": "string", "maxLength": 32}}, "required": ["message"]})";
  echo.triggers = {"^echo\\b"};
  echo.exec.command = {"/bin/echo", "{message}"};
  return echo;
}

// POST /v1/tasks end to end: a trigger runs its tool, the result is structured, a bad
// request or an unknown session gets its status, and /metrics counts tasks and tool runs.
TEST_F(Server, TasksRunConfiguredTools) {
  ServerConfig cfg;
  const ToolConfig echo = echo_tool();
  ToolConfig calc;
  calc.name = "calculator";
  calc.parameters_json = R"({"type": "object", "properties": {"expression": {"type": "string", "maxLength": 8}}})";
  calc.exec.builtin = "calculator";
  cfg.tools = {echo, calc};
  cfg.api_keys = {"key-all", "key-calc"};
  cfg.tool_access = {{"key-calc", {"calculator"}}};
  start(cfg);
  auto task = [&](const json& body, const std::string& key) {
    return request(port, "POST", "/v1/tasks", body.dump(), "Bearer " + key);
  };
  const Response r = task({{"input", "echo something"}, {"seed", 1}, {"max_steps", 1}}, "key-all");
  ASSERT_EQ(r.status, 200) << r.body;
  const json out = r.j();
  EXPECT_EQ(out["status"], "done") << r.body;
  ASSERT_EQ(out["steps"].size(), 1u);
  EXPECT_EQ(out["steps"][0]["tool"], "echo");
  EXPECT_TRUE(out["session"].is_string());
  // The same trigger from a key that may only use the calculator: the calculator is forced.
  const Response limited =
      task({{"input", "echo something"}, {"seed", 1}, {"max_steps", 1}, {"force_action", "call"}}, "key-calc");
  ASSERT_EQ(limited.status, 200) << limited.body;
  EXPECT_EQ(limited.j()["steps"][0]["tool"], "calculator") << limited.body;
  expect_error(task({{"input", ""}}, "key-all"), 400, "input");
  expect_error(task({{"input", "x"}, {"session", "nope"}}, "key-all"), 404, "session");
  // An input too long for the context is the request's fault: a 400 on `input`, not a 500.
  expect_error(task({{"input", std::string(60000, 'x')}}, "key-all"), 400, "input");
  expect_error(task({{"input", "x"}, {"force_action", "dance"}}, "key-all"), 400, "force_action");
  EXPECT_GE(metric(port, "autoglm_tasks_total{status=\"done\"}"), 1);
  EXPECT_GE(metric(port, "autoglm_tool_calls_total{tool=\"echo\",status=\"ok\"}"), 1);
}

// A tool run through the server sees none of its sockets: not the listening one, not the
// connection of the client that asked, not another client's.
TEST_F(Server, ToolProcessesInheritNoServerSocket) {
  ServerConfig cfg;
  ToolConfig fds;
  fds.name = "fds";
  fds.description = "List open descriptors";
  fds.triggers = {"^fds\\b"};
  fds.exec.command = {"/bin/ls", "/proc/self/fd"};
  // No arguments: with any object allowed, a random draw could make one that the argument
  // rules refuse (a value starting with '-'), and the test would not reach the command.
  fds.parameters_json = R"({"type": "object", "additionalProperties": false})";
  cfg.tools = {fds};
  start(cfg);
  net::io_context ioc;
  tcp::socket idle(ioc);  // another client's open connection
  idle.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), uint16_t(port)));
  const Response r = request(port, "POST", "/v1/tasks", json{{"input", "fds now"}, {"max_steps", 1}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json out = r.j();
  ASSERT_EQ(out["steps"].size(), 1u) << r.body;
  EXPECT_EQ(out["steps"][0]["result"], "0\n1\n2\n3\n") << r.body;
}

// A task whose client goes away stops: the tool it runs is killed, and none of the steps it
// had left runs. Gone is a reset or a plain close: for a task, a FIN counts (a client that timed
// out and closed sends one), though other requests take it for a half-close and still answer.
TEST_F(Server, TaskStopsWhenItsClientGoesAway) {
  const std::string log = test::temp_path("task-steps.log"), gate = test::temp_path("task-gate");
  std::filesystem::remove(log);
  std::filesystem::remove(gate);
  // Each run notes itself, then waits for the gate (which this test opens only at the end).
  const std::string script = "echo ran >> " + log + "; while [ ! -e " + gate + " ]; do sleep 0.01; done";
  ToolConfig block;
  block.name = "block";
  block.description = "Wait for the gate";
  block.parameters_json = R"({"type": "object", "additionalProperties": false})";
  block.exec.command = {"/bin/sh", "-c", script};
  block.exec.timeout_ms = 60000;
  ServerConfig cfg;
  cfg.tools = {block};
  start(cfg);
  const auto steps_run = [&] {
    std::ifstream in(log);
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  };
  // Gone by a plain close (a FIN, as a client that timed out sends it), then by a reset.
  for (const bool reset : {false, true}) {
    SCOPED_TRACE(reset ? "closed with a reset" : "closed with a FIN");
    const int round = reset ? 2 : 1;
    std::filesystem::remove(log);
    std::filesystem::remove(gate);
    {
      net::io_context ioc;
      tcp::socket client(ioc);
      client.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), uint16_t(port)));
      // force_action call: every one of the six steps calls the tool.
      const std::string body = json{{"input", "wait six times"}, {"force_action", "call"}, {"max_steps", 6}}.dump();
      const std::string req =
          "POST /v1/tasks HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
          "Content-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body;
      boost::system::error_code ec;
      net::write(client, net::buffer(req), ec);
      ASSERT_FALSE(ec) << ec.message();
      // Its note written (the process alone may not have run its first line yet).
      ASSERT_TRUE(test::wait_until([&] { return steps_run() == 1 && test::process_with_argument(script); }))
          << "the tool never started";
      if (reset) client.set_option(net::socket_base::linger(true, 0));  // close() now resets the connection
      client.close(ec);
    }
    const bool cancelled =
        test::wait_until([&] { return metric(port, "autoglm_tasks_total{status=\"cancelled\"}") >= round; });
    const bool tool_gone = !test::process_with_argument(script);
    std::ofstream(gate).put('x');  // open the gate: a task still running would now run its other steps
    EXPECT_TRUE(cancelled) << "the task was never reported cancelled";
    EXPECT_TRUE(tool_gone) << "the running tool outlived its client";
    EXPECT_TRUE(test::wait_until([&] { return api->in_flight() == 0; })) << "the task is still in flight";
    EXPECT_EQ(steps_run(), 1) << "a step ran after the client went away";
    EXPECT_EQ(metric(port, "autoglm_tool_calls_total{tool=\"block\",status=\"error\"}"), round);
  }
  std::filesystem::remove(log);
  std::filesystem::remove(gate);
}

// A task refused because the engine's queue is full is a 429 like any other: type
// rate_limit_error and a Retry-After.
TEST_F(Server, TaskRefusedByAFullQueueIsARateLimitError) {
  ServerConfig cfg;
  cfg.runtime.max_queued = 2;
  cfg.tools = {echo_tool()};
  start(cfg);
  Response first, second, task;
  bool both = false;
  std::thread a, b;
  {
    // Held: the two chats stay queued, so the task's generation finds the queue full.
    test::EngineHold hold(*api);
    a = std::thread([&] { first = request(port, "POST", "/v1/chat/completions", chat("one", 2)); });
    if (test::wait_until([&] { return api->in_flight() >= 1; }))
      b = std::thread([&] { second = request(port, "POST", "/v1/chat/completions", chat("two", 2)); });
    both = b.joinable() && test::wait_until([&] { return api->in_flight() >= 2; });
    if (both) task = request(port, "POST", "/v1/tasks", json{{"input", "echo hi"}, {"max_steps", 1}}.dump());
  }  // released: the chats finish
  a.join();
  if (b.joinable()) b.join();
  ASSERT_TRUE(both) << "the two chats never got in flight";
  expect_error(task, 429, "");
  EXPECT_EQ(task.j()["error"]["type"], "rate_limit_error") << task.body;
  EXPECT_EQ(task.retry_after, "1");
  EXPECT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(second.status, 200) << second.body;
  EXPECT_TRUE(test::wait_until([&] { return api->in_flight() == 0; }));
}

// A session answers only to the key that created it; another key gets exactly the reply an
// unknown id gets. Ids are 128-bit random, not counters.
TEST_F(Server, TaskSessionsBelongToTheirKey) {
  ServerConfig cfg;
  cfg.tools = {echo_tool()};
  cfg.api_keys = {"key-a", "key-b"};
  start(cfg);
  auto task = [&](const json& body, const std::string& key) {
    return request(port, "POST", "/v1/tasks", body.dump(), "Bearer " + key);
  };
  const Response first = task({{"input", "echo hi"}, {"seed", 1}, {"max_steps", 1}}, "key-a");
  ASSERT_EQ(first.status, 200) << first.body;
  const std::string id = first.j()["session"];
  EXPECT_TRUE(std::regex_match(id, std::regex("task_[A-Za-z0-9_-]{22}"))) << id;
  const std::string unknown = "task_" + std::string(22, 'A');
  const Response foreign = task({{"input", "echo again"}, {"session", id}, {"max_steps", 1}}, "key-b");
  const Response missing = task({{"input", "echo again"}, {"session", unknown}, {"max_steps", 1}}, "key-b");
  expect_error(foreign, 404, "session");
  expect_error(missing, 404, "session");
  std::string foreign_text = foreign.body, missing_text = missing.body;
  foreign_text.replace(foreign_text.find(id), id.size(), "ID");
  missing_text.replace(missing_text.find(unknown), unknown.size(), "ID");
  EXPECT_EQ(foreign_text, missing_text);
  const Response own = task({{"input", "echo again"}, {"session", id}, {"seed", 1}, {"max_steps", 1}}, "key-a");
  EXPECT_EQ(own.status, 200) << own.body;
  EXPECT_EQ(own.j()["session"], id);
  // Ids share nothing a counter would: a second session's id differs in most characters.
  const std::string second = task({{"input", "echo x"}, {"seed", 1}, {"max_steps", 1}}, "key-a").j()["session"];
  int same = 0;
  for (size_t i = 0; i < id.size(); ++i) same += id[i] == second[i];
  EXPECT_LT(same, 12) << id << " " << second;
}

TEST(ServerConfigRules, ToolAccessWithoutApiKeysIsRefusedAtStartUp) {
  ServerConfig cfg;
  cfg.model = test::shared_path("models/stories260K.gguf");
  cfg.tools = {echo_tool()};
  cfg.tool_access = {{"sk-reports", {"echo"}}};
  Status st = ApiService(cfg).load();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("tool_access"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("api_keys is empty"), std::string::npos) << st.message();
  cfg.api_keys = {"sk-other"};  // a limited key that is not a key at all
  st = ApiService(cfg).load();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("not one of api_keys"), std::string::npos) << st.message();
  cfg.api_keys = {"sk-other", "sk-reports"};
  EXPECT_TRUE(check_access_rules(cfg).is_ok());
}

TEST(ServerConfigRules, AnEmptyApiKeyIsRefused) {
  // `--api-key ""` used to turn authentication off without a word.
  ServerConfig cfg;
  cfg.model = test::shared_path("models/stories260K.gguf");
  cfg.api_keys = {""};
  const Status st = ApiService(cfg).load();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("api_keys holds an empty key"), std::string::npos) << st.message();
}

TEST_F(Server, MetricsNeedAKeyOnlyWhenConfigured) {
  ServerConfig cfg;
  cfg.api_keys = {"sk-1"};
  start(cfg);
  EXPECT_EQ(request(port, "GET", "/metrics").status, 200);
  server->stop();
  cfg.metrics_require_key = true;
  start(cfg);
  EXPECT_EQ(request(port, "GET", "/metrics").status, 401);
  EXPECT_EQ(request(port, "GET", "/metrics", "", "Bearer wrong").status, 401);
  EXPECT_EQ(request(port, "GET", "/metrics", "", "Bearer sk-1").status, 200);
}

std::string template_file(const std::string& name, const std::string& source) {
  const std::string path = test::temp_path(name);
  std::ofstream(path) << source;
  return path;
}

TEST_F(Server, HostileTemplateOfTheModelIsAStartUpError) {
  ServerConfig cfg;
  cfg.runtime.chat_template = template_file("recursive.jinja", "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}");
  start(cfg, /*load=*/false);
  const Status st = api->load();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("fails a dry render"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("nest deeper than"), std::string::npos) << st.message();
}

// A template that turns hostile on a request's chat_template_kwargs: that request gets a 400
// naming the limit, other clients are served meanwhile, and once shutdown begins a render
// stops at its next step.
TEST_F(Server, HostileRenderIsA400AndOthersAreServed) {
  ServerConfig cfg;
  cfg.runtime.chat_template = template_file(
      "bomb.jinja",
      "{% if bomb %}{% for a in range(1000000) %}{% for b in range(1000000) %}x{% endfor %}{% endfor %}{% endif %}"
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "<|im_start|>assistant\n");
  start(cfg);
  json bomb = json::parse(chat("hi", 2));
  bomb["chat_template_kwargs"] = {{"bomb", true}};
  std::thread attacker([&] {
    for (int i = 0; i < 3; ++i) {
      const Response r = request(port, "POST", "/v1/chat/completions", bomb.dump());
      expect_error(r, 400, "messages");
      EXPECT_NE(r.body.find("steps"), std::string::npos) << r.body;
    }
  });
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(request(port, "GET", "/health").status, 200);
    EXPECT_EQ(request(port, "POST", "/v1/chat/completions", chat("hello", 2)).status, 200);
  }
  attacker.join();
  api->begin_stop();
  const Response cancelled = request(port, "POST", "/v1/chat/completions", bomb.dump());
  expect_error(cancelled, 400, "messages");
  EXPECT_NE(cancelled.body.find("cancelled"), std::string::npos) << cancelled.body;
}

// Slow preparation (here a template render of millions of steps) runs on workers, not on
// the I/O threads: with three slow requests in flight, a health check is answered before
// any of them.
TEST_F(Server, SlowRequestsDoNotHoldTheIoThreads) {
  ServerConfig cfg;
  cfg.runtime.chat_template = template_file(
      "slow.jinja",
      "{% if bomb %}{% for a in range(1000000) %}{% for b in range(1000000) %}x{% endfor %}{% endfor %}{% endif %}"
      "{% for m in messages %}{{ m.content }}{% endfor %}");
  start(cfg);
  json bomb = json::parse(chat("hi", 2));
  bomb["chat_template_kwargs"] = {{"bomb", true}};
  using Clock = std::chrono::steady_clock;
  std::atomic<int64_t> first_slow_done{INT64_MAX};
  std::vector<std::thread> slow;
  for (int i = 0; i < 3; ++i)
    slow.emplace_back([&] {
      request(port, "POST", "/v1/chat/completions", bomb.dump());
      const int64_t t = Clock::now().time_since_epoch().count();
      int64_t seen = first_slow_done.load();
      while (t < seen && !first_slow_done.compare_exchange_weak(seen, t)) {
      }
    });
  // All three are being prepared (rendering) on workers when the health check is asked.
  const bool all_preparing = test::wait_until([&] { return server->requests_preparing() >= 3; });
  const Response health = request(port, "GET", "/health");
  const int64_t health_done = Clock::now().time_since_epoch().count();
  for (auto& t : slow) t.join();
  ASSERT_TRUE(all_preparing) << "the three slow requests were never prepared together";
  EXPECT_EQ(health.status, 200);
  EXPECT_LT(health_done, first_slow_done.load()) << "the health check waited for a slow request";
}

// Probes are answered on the I/O threads: with every preparation worker held (four embeddings
// requests waiting on a held engine), /health and /ready still answer.
TEST_F(Server, ProbesAnswerWhileEveryPreparationWorkerIsBusy) {
  start();
  std::optional<test::EngineHold> hold(std::in_place, *api);
  std::vector<std::thread> held;
  for (int i = 0; i < 4; ++i)
    held.emplace_back([&] { test::http_call(port, "POST", "/v1/embeddings", R"({"input": "hello"})"); });
  const bool all_preparing = test::wait_until([&] { return server->requests_preparing() == 4; });
  std::atomic<bool> answered{false};
  test::HttpResult health, ready;
  std::thread probe([&] {
    health = test::http_call(port, "GET", "/health");
    ready = test::http_call(port, "GET", "/ready");
    answered = true;
  });
  const bool in_time = test::wait_until([&] { return answered.load(); }, std::chrono::seconds(30));
  hold.reset();  // the embeddings (and, on a server that queued them, the probes) go on
  probe.join();
  for (auto& t : held) t.join();
  ASSERT_TRUE(all_preparing) << "the four embeddings requests were never prepared together";
  EXPECT_TRUE(in_time) << "the probes waited behind the preparation workers";
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(ready.status, 200) << ready.body;
}

TEST_F(Server, ClientsOverTheirRateGet429) {
  ServerConfig cfg;
  cfg.rate_limit_per_second = 0.1;
  cfg.rate_limit_burst = 2;
  start(cfg);
  const std::string body = R"({"content": "hello"})";
  EXPECT_EQ(request(port, "POST", "/tokenize", body).status, 200);
  EXPECT_EQ(request(port, "POST", "/tokenize", body).status, 200);
  const Response refused = request(port, "POST", "/tokenize", body);
  expect_error(refused, 429, "");
  EXPECT_EQ(refused.retry_after, "10");
  EXPECT_EQ(request(port, "GET", "/metrics").status, 200) << "scrapes are not rate limited";
}

TEST_F(Server, ConnectionsOverTheLimitAreClosed) {
  ServerConfig cfg;
  cfg.max_connections = 4;
  start(cfg);
  net::io_context ioc;
  std::vector<std::unique_ptr<tcp::socket>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<tcp::socket>(ioc));
    held.back()->connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), uint16_t(port)));
  }
  for (auto& s : held) {  // each is answered (keep-alive), so the server has accepted it and holds its place
    net::write(*s, net::buffer(std::string("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")));
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    beast::error_code ec;
    http::read(*s, buffer, res, ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_EQ(res.result_int(), 200);
  }
  EXPECT_EQ(raw_exchange(port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 0)
      << "a fifth connection was served";
  held.clear();  // the server notices the closed connections and frees their places
  int status = 0;
  test::wait_until([&] {
    return (status = raw_exchange(port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")) == 200;
  });
  EXPECT_EQ(status, 200) << "the closed connections' places were never freed";
}

// Graceful drain: a task and a stream in flight finish (the stream with [DONE]); a request
// that arrives meanwhile gets 503 with Retry-After; then the server stops.
TEST_F(Server, DrainLetsRequestsInFlightFinish) {
  ServerConfig cfg;
  ToolConfig slow = echo_tool();
  slow.name = "slow";
  slow.triggers = {"^slow\\b"};
  slow.exec.command = {"/bin/sh", "-c", "sleep 0.2; echo done"};
  cfg.tools = {slow};
  cfg.runtime.context_window = 4096;
  start(cfg);
  Response task_reply, stream_reply;
  // The engine is held until the drain has begun: the stream and the task (whose generation
  // picks the tool's arguments) are both still in flight then, however slow the machine.
  std::optional<test::EngineHold> hold(std::in_place, *api);
  // The stream first, then the task: a task's own generation counts in in_flight too, so only
  // this order makes in_flight >= 2 mean both.
  json long_stream = json::parse(chat("hello", 4000, true));
  long_stream["ignore_eos"] = true;
  std::thread stream([&] { stream_reply = request(port, "POST", "/v1/chat/completions", long_stream.dump()); });
  EXPECT_TRUE(test::wait_until([&] { return api->in_flight() >= 1; })) << "the stream never got in flight";
  std::thread task([&] {
    task_reply = request(port, "POST", "/v1/tasks", json{{"input", "slow please"}, {"max_steps", 1}}.dump());
  });
  EXPECT_TRUE(test::wait_until([&] { return api->in_flight() >= 2; })) << "the task never got in flight";
  std::thread drain([&] { server->drain_and_stop(30); });
  Response refused;
  test::wait_until([&] { return (refused = request(port, "GET", "/v1/models")).status == 503; });
  hold.reset();
  EXPECT_EQ(refused.status, 503) << "the drain never refused a request";
  EXPECT_EQ(refused.retry_after, "1");
  task.join();
  stream.join();
  drain.join();
  EXPECT_EQ(task_reply.status, 200) << task_reply.body;
  EXPECT_EQ(task_reply.j()["steps"][0]["result"], "done\n") << task_reply.body;
  EXPECT_EQ(stream_reply.status, 200);
  EXPECT_NE(stream_reply.body.find("data: [DONE]"), std::string::npos) << stream_reply.body;
  EXPECT_EQ(api->in_flight(), 0);
}

// Past the grace period, the tools that tasks still run are ended: the drain does not wait
// for their timeouts.
TEST_F(Server, DrainEndsToolsStillRunningAfterTheGrace) {
  ServerConfig cfg;
  ToolConfig slow = echo_tool();
  slow.name = "slow";
  slow.triggers = {"^slow\\b"};
  slow.exec.command = {"/bin/sleep", "30.125"};
  slow.exec.timeout_ms = 60000;
  cfg.tools = {slow};
  start(cfg);
  Response task_reply;
  std::thread task([&] {
    task_reply = request(port, "POST", "/v1/tasks", json{{"input", "slow please"}, {"max_steps", 1}}.dump());
  });
  // The task's generation picks the tool's arguments first: wait until the tool runs.
  const bool tool_started = test::wait_until([] { return test::process_with_argument("30.125"); });
  if (!tool_started) task.join();  // (a joinable thread must not outlive the test)
  ASSERT_TRUE(tool_started) << "the tool never started";
  server->drain_and_stop(0.2);
  task.join();
  // The tool was ended, so the task answered (its step failed) before the server stopped.
  ASSERT_EQ(task_reply.status, 200) << task_reply.body;
  EXPECT_TRUE(task_reply.j()["steps"][0].contains("error")) << task_reply.body;
  EXPECT_EQ(api->in_flight(), 0);
}

// Every route of the table reaches the handler its group bound (dispatch has no list of its
// own): none answers the dispatcher's "no route" (a handler's own 404 names what it lacks).
TEST_F(Server, EveryRouteReachesTheHandlerItsGroupBound) {
  ServerConfig cfg;
  start(cfg);
  for (const HttpRoute& route : http_routes()) {
    std::string path;
    for (size_t at = 0; at < route.pattern.size();) {  // each {parameter} as "x1"
      const size_t open = route.pattern.find('{', at);
      if (open == std::string_view::npos) {
        path += route.pattern.substr(at);
        break;
      }
      path += route.pattern.substr(at, open - at);
      path += "x1";
      at = route.pattern.find('}', open) + 1;
    }
    HttpRequest req;
    req.method = std::string(route.method);
    req.target = path;
    req.body = "{}";
    const Reply r = api->handle(req);
    EXPECT_EQ(r.body.find("no route "), std::string::npos) << req.method << " " << path << ": " << r.body;
  }
}

// The mixture-of-experts models serve through the same door as the dense ones: a completion is
// the engine's greedy continuation of the prompt as the server tokenizes it (the Generator's, in
// process), streamed or not, and the Anthropic Messages route answers on them too.
TEST_F(Server, MixtureOfExpertsModelsServeTheirGreedyText) {
  for (const char* name : {"rand-qwen3moe", "rand-glm4moe", "rand-gpt-oss", "rand-deepseek2-mla"}) {
    SCOPED_TRACE(name);
    const std::string rel = std::string("models/random/") + name + ".gguf";
    AUTOGLM_REQUIRE_SHARED(rel);
    ServerConfig cfg;
    cfg.model = test::shared_path(rel);
    start(cfg);
    const std::string prompt = "hello world";
    const json body = {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}};
    const Response plain = request(port, "POST", "/v1/completions", body.dump());
    ASSERT_EQ(plain.status, 200) << plain.body;
    const std::string text = plain.j()["choices"][0]["text"].get<std::string>();
    const int completion_tokens = plain.j()["usage"]["completion_tokens"].get<int>();
    EXPECT_GT(completion_tokens, 0);
    EXPECT_FALSE(text.empty());

    json streamed_body = body;
    streamed_body["stream"] = true;
    const Response streamed = request(port, "POST", "/v1/completions", streamed_body.dump());
    ASSERT_EQ(streamed.status, 200) << streamed.body;
    std::string streamed_text;
    for (size_t at = 0; (at = streamed.body.find("data: {", at)) != std::string::npos; ++at) {
      const json chunk = json::parse(streamed.body.substr(at + 6, streamed.body.find('\n', at) - at - 6));
      if (!chunk["choices"].empty()) streamed_text += chunk["choices"][0]["text"].get<std::string>();
    }
    EXPECT_EQ(streamed_text, text);

    const Response tokenized =
        request(port, "POST", "/tokenize", json{{"content", prompt}, {"add_special", true}}.dump());
    ASSERT_EQ(tokenized.status, 200) << tokenized.body;
    auto model = Model::load(cfg.model);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    auto tok = Tokenizer::from_gguf((*model)->file());
    ASSERT_TRUE(tok.is_ok()) << tok.status().message();
    ThreadPool pool(2);
    Generator gen(**model, **tok, pool, 256);
    GenerationRequest alone;
    alone.prompt = tokenized.j()["tokens"].get<std::vector<int32_t>>();
    alone.max_tokens = 8;
    alone.sampling.temperature = 0;
    auto expected = gen.generate(alone);
    ASSERT_TRUE(expected.is_ok()) << expected.status().message();
    EXPECT_EQ(int(expected->tokens.size()), completion_tokens);
    // The reply is JSON: bytes that are not UTF-8 (random byte tokens) come as U+FFFD.
    const std::string decoded = (*tok)->decode(expected->tokens);
    EXPECT_EQ(json::parse(json(decoded).dump(-1, ' ', false, json::error_handler_t::replace)), text);

    const json message = {{"model", std::string(name) + ".gguf"},
                          {"max_tokens", 4},
                          {"temperature", 0},
                          {"messages", {{{"role", "user"}, {"content", prompt}}}}};
    const Response anthropic = request(port, "POST", "/v1/messages", message.dump());
    ASSERT_EQ(anthropic.status, 200) << anthropic.body;
    EXPECT_EQ(anthropic.j()["type"], "message");
    EXPECT_GT(anthropic.j()["usage"]["output_tokens"].get<int>(), 0);
  }
}

}  // namespace
}  // namespace autoglm
