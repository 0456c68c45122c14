// Tools from the configuration and the task pipeline: executors (argv never through a
// shell, timeouts, output caps, HTTP to allowlisted hosts, builtins), registry errors with
// key paths, and the pipeline's trigger, clarify / follow-up and failure paths on a real
// (tiny) model.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "autoglm/runtime.h"
#include "sample/grammar.h"
#include "sample/json_schema.h"
#include "tasks/calculator.h"
#include "tasks/executors.h"
#include "tasks/task_pipeline.h"
#include "test_util.h"

namespace autoglm {
namespace {

using nlohmann::json;

ToolConfig command_tool(const std::string& name, std::vector<std::string> argv, int64_t timeout_ms = 2000,
                        int64_t max_output = 4096) {
  ToolConfig t;
  t.name = name;
  t.description = "runs " + argv[0];
  t.parameters_json =
      R"({"type": "object", "properties": {"message": {"type": "string", "maxLength": 64}}, "required": ["message"]})";
  t.exec.command = std::move(argv);
  t.exec.timeout_ms = timeout_ms;
  t.exec.max_output_bytes = max_output;
  return t;
}

std::shared_ptr<ToolRegistry> registry(const std::vector<ToolConfig>& tools) {
  auto r = ToolRegistry::build(tools);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r ? *r : nullptr;
}

TEST(ToolExecutors, MaliciousArgumentsStayOneLiteralArgument) {
  const std::string marker = test::temp_path("pwned");
  std::filesystem::remove(marker);
  auto reg = registry({command_tool("echo", {"/bin/echo", "{message}"})});
  ASSERT_TRUE(reg);
  const std::vector<std::string> evils = {"; rm -rf /", "$(touch " + marker + ")", "`touch " + marker + "`",
                                          "a\nb; touch " + marker, "' \" | & > " + marker};
  for (const std::string& evil : evils) {
    const ToolOutcome o = execute_tool(*reg, reg->tools()[0], json{{"message", evil}}, "test");
    EXPECT_TRUE(o.ok) << o.error;
    EXPECT_EQ(o.output, evil + "\n");  // echo printed its one argument, untouched
  }
  EXPECT_FALSE(std::filesystem::exists(marker)) << "a shell ran";
}

// Tool "show"'s `message` values that leave root_with_an_escape's folder are refused, naming the
// tool, the parameter and the value (and `hint`, when given).
void expect_escapes_refused(const ToolRegistry& reg, const std::string& hint) {
  for (const std::string evil : {"../secret", "docs/../../x", "/etc/passwd", "escape/passwd"}) {
    const ToolOutcome o = execute_tool(reg, reg.tools()[0], json{{"message", evil}}, "test");
    EXPECT_FALSE(o.ok) << evil;
    EXPECT_NE(o.error.find("tool 'show', parameter 'message': '" + evil + "' resolves outside"), std::string::npos)
        << o.error;
    if (!hint.empty()) {
      EXPECT_NE(o.error.find(hint), std::string::npos) << o.error;
    }
  }
}

// A fresh folder `name` with docs/ inside and escape/, a symlink out of it to /etc.
std::filesystem::path root_with_an_escape(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path root = test::temp_path(name);
  fs::remove_all(root);
  fs::create_directories(root / "docs");
  fs::create_symlink("/etc", root / "escape");
  return root;
}

TEST(ToolExecutors, OptionsAndPathsOutsideTheirRootAreRefused) {
  // A leading '-' reaches the command as an option: refused unless the parameter allows it.
  auto reg = registry({command_tool("echo", {"/bin/echo", "{message}"})});
  ASSERT_TRUE(reg);
  for (const std::string evil : {"--help", "-e \\x41", "-n"}) {
    const ToolOutcome o = execute_tool(*reg, reg->tools()[0], json{{"message", evil}}, "test");
    EXPECT_FALSE(o.ok) << evil;
    EXPECT_NE(o.error.find("tool 'echo', parameter 'message': a value starting with '-' is refused"), std::string::npos)
        << o.error;
  }
  ToolConfig dashes = command_tool("echo", {"/bin/echo", "x", "{message}"});
  dashes.arguments["message"].allow_leading_dash = true;
  reg = registry({dashes});
  ASSERT_TRUE(reg);
  EXPECT_EQ(execute_tool(*reg, reg->tools()[0], json{{"message", "-1"}}, "test").output, "x -1\n");
  // A path confined under a root: '..' and symlinks that leave it are refused; inside, the
  // command gets the resolved path.
  namespace fs = std::filesystem;
  const fs::path root = root_with_an_escape("tool-root");
  ToolConfig cat = command_tool("show", {"/bin/echo", "{message}"});
  cat.arguments["message"].path_under = root.string();
  reg = registry({cat});
  ASSERT_TRUE(reg);
  expect_escapes_refused(*reg, "");
  const ToolOutcome ok = execute_tool(*reg, reg->tools()[0], json{{"message", "docs/../docs/a.txt"}}, "test");
  EXPECT_TRUE(ok.ok) << ok.error;
  EXPECT_EQ(ok.output, (fs::weakly_canonical(root) / "docs" / "a.txt").string() + "\n");
  // A rule for a parameter the schema does not have is a configuration error.
  ToolConfig wrong = command_tool("echo", {"/bin/echo", "{message}"});
  wrong.arguments["mesage"].allow_leading_dash = true;
  auto bad = ToolRegistry::build({wrong});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("tools[0].arguments.mesage"), std::string::npos) << bad.status().message();
}

// An operator who sets a command tool's cwd means it to stay there: a value that would
// resolve outside it is refused unless the parameter says it is not a path. A value is
// checked, not rewritten (the command runs in cwd, where it means the same path).
TEST(ToolExecutors, CwdConfinesValuesUnlessTheParameterIsNotAPath) {
  namespace fs = std::filesystem;
  const fs::path root = root_with_an_escape("tool-cwd");
  ToolConfig show = command_tool("show", {"/bin/echo", "{message}"});
  show.exec.cwd = root.string();
  auto reg = registry({show});
  ASSERT_TRUE(reg);
  expect_escapes_refused(*reg, "arguments.message.not_a_path");
  EXPECT_EQ(execute_tool(*reg, reg->tools()[0], json{{"message", "docs/a.txt"}}, "test").output, "docs/a.txt\n");
  show.arguments["message"].not_a_path = true;  // free text: the cwd does not confine it
  reg = registry({show});
  ASSERT_TRUE(reg);
  EXPECT_EQ(execute_tool(*reg, reg->tools()[0], json{{"message", "../x"}}, "test").output, "../x\n");
  show.arguments["message"].path_under = root.string();
  auto both = ToolRegistry::build({show});
  ASSERT_FALSE(both.is_ok());
  EXPECT_NE(both.status().message().find("tools[0].arguments.message: path_under and not_a_path"), std::string::npos)
      << both.status().message();
  fs::remove_all(root);
}

TEST(ToolExecutors, TimeoutOversizedOutputAndFailuresAreOutcomes) {
  auto reg =
      registry({command_tool("slow", {"/bin/sleep", "60"}, 200),
                command_tool("loud", {"/usr/bin/yes", "{message}"}, 5000, 1000), command_tool("fails", {"/bin/false"}),
                command_tool("missing", {"/no/such/program"}), command_tool("cwd", {"/bin/pwd"})});
  ASSERT_TRUE(reg);
  const json args = {{"message", "x"}};
  const auto start = std::chrono::steady_clock::now();
  ToolOutcome o = execute_tool(*reg, *reg->find("slow"), args, "test");
  EXPECT_FALSE(o.ok);
  EXPECT_NE(o.error.find("timed out after 200 ms"), std::string::npos) << o.error;
  // Far under the command's 60 s, however loaded the machine: it was killed, not waited for.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << "the child was not killed";
  o = execute_tool(*reg, *reg->find("loud"), args, "test");
  EXPECT_FALSE(o.ok);
  EXPECT_NE(o.error.find("output exceeds 1000 bytes"), std::string::npos) << o.error;
  EXPECT_EQ(o.output.size(), 1000u);
  o = execute_tool(*reg, *reg->find("fails"), args, "test");
  EXPECT_EQ(o.error, "exited with status 1");
  o = execute_tool(*reg, *reg->find("missing"), args, "test");
  EXPECT_EQ(o.error, "could not run /no/such/program");
  const auto counts = reg->stats().snapshot();
  EXPECT_EQ(counts.at("slow").error, 1);
  EXPECT_EQ(counts.at("loud").error, 1);
}

TEST(ToolExecutors, CommandGetsOnlyAllowlistedEnvironmentAndItsDirectory) {
  setenv("AUTOGLM_TEST_SECRET", "s3cret", 1);
  setenv("AUTOGLM_TEST_OPEN", "visible", 1);
  ToolConfig env = command_tool("env", {"/usr/bin/env"});
  env.exec.env = {"AUTOGLM_TEST_OPEN"};
  ToolConfig pwd = command_tool("pwd", {"/bin/pwd"});
  pwd.exec.cwd = "/tmp";
  auto reg = registry({env, pwd});
  ASSERT_TRUE(reg);
  ToolOutcome o = execute_tool(*reg, *reg->find("env"), json{{"message", "x"}}, "test");
  EXPECT_EQ(o.output, "AUTOGLM_TEST_OPEN=visible\n");
  o = execute_tool(*reg, *reg->find("pwd"), json{{"message", "x"}}, "test");
  EXPECT_EQ(o.output, "/tmp\n");
}

// Polls `done` every 20 ms for up to 10 s.
bool eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 500; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

// A listening loopback socket opened without O_CLOEXEC, as a careless library would.
int inheritable_listener(int port = 0) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(uint16_t(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 4) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int port_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

TEST(ToolExecutors, CommandInheritsOnlyStandardDescriptors) {
  const int listener = inheritable_listener();
  ASSERT_GE(listener, 0);
  const int file = open("/proc/self/status", O_RDONLY);  // no O_CLOEXEC either
  auto reg = registry({command_tool("fds", {"/bin/ls", "/proc/self/fd"})});
  ASSERT_TRUE(reg);
  const ToolOutcome o = execute_tool(*reg, reg->tools()[0], json{{"message", "x"}}, "test");
  EXPECT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.output, "0\n1\n2\n3\n");  // stdin, stdout, stderr and the listing's own directory
  close(file);
  close(listener);
}

TEST(ToolExecutors, EscapedProcessDiesAtTheTimeoutAndThePortIsFree) {
  const int listener = inheritable_listener();
  ASSERT_GE(listener, 0);
  const int port = port_of(listener);
  // setsid leaves the tool's process group and session; the sleep keeps the output pipe open.
  auto reg = registry({command_tool("escape", {"/usr/bin/setsid", "/bin/sleep", "4242.25"}, 300)});
  ASSERT_TRUE(reg);
  const ToolOutcome o = execute_tool(*reg, reg->tools()[0], json{{"message", "x"}}, "test");
  EXPECT_NE(o.error.find("timed out after 300 ms"), std::string::npos) << o.error;
  EXPECT_FALSE(test::process_with_argument("4242.25")) << "the escaped sleep outlived its tool's timeout";
  close(listener);
  const int again = inheritable_listener(port);
  EXPECT_GE(again, 0) << "port " << port << " is still held";
  if (again >= 0) close(again);
}

TEST(ToolExecutors, WhatACommandLeavesRunningEndsWithIt) {
  auto reg = registry({command_tool(
      "daemon", {"/bin/sh", "-c", "/usr/bin/setsid /bin/sleep 4243.25 >/dev/null 2>&1 & echo started"}, 5000)});
  ASSERT_TRUE(reg);
  const ToolOutcome o = execute_tool(*reg, reg->tools()[0], json{{"message", "x"}}, "test");
  EXPECT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.output, "started\n");
  EXPECT_FALSE(test::process_with_argument("4243.25")) << "the tool's daemon outlived it";
}

TEST(ToolExecutors, ServerDeathEndsTheCommandsItStarted) {
  auto reg = registry({command_tool("escape", {"/usr/bin/setsid", "/bin/sleep", "4244.25"}, 60000)});
  ASSERT_TRUE(reg);
  const pid_t server = fork();  // stands in for a server that crashes while a tool runs
  if (server == 0) {
    execute_tool(*reg, reg->tools()[0], json{{"message", "x"}}, "test");
    _exit(0);
  }
  ASSERT_GT(server, 0);
  ASSERT_TRUE(eventually([] { return test::process_with_argument("4244.25"); })) << "the tool never started";
  kill(server, SIGKILL);
  waitpid(server, nullptr, 0);
  EXPECT_TRUE(eventually([] { return !test::process_with_argument("4244.25"); })) << "the tool outlived the server";
}

// A listening socket on a free loopback port (the port in `port`).
int listen_on_loopback(int& port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  listen(fd, 4);
  return fd;
}

// A one-shot HTTP server on loopback: answers each connection with `reply`, keeps the request.
class TinyHttp {
 public:
  explicit TinyHttp(std::string reply) : reply_(std::move(reply)) {
    fd_ = listen_on_loopback(port_);
    thread_ = std::thread([this] {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[8192];
      ssize_t n;
      while ((n = recv(c, buf, sizeof(buf), 0)) > 0) {
        request_.append(buf, size_t(n));
        const size_t head = request_.find("\r\n\r\n");
        if (head == std::string::npos) continue;
        const size_t cl = request_.find("Content-Length: ");
        const size_t want = cl == std::string::npos ? 0 : size_t(std::atoi(request_.c_str() + cl + 16));
        if (request_.size() >= head + 4 + want) break;
      }
      send(c, reply_.data(), reply_.size(), 0);
      close(c);
    });
  }
  ~TinyHttp() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  const std::string& request() const { return request_; }

 private:
  std::string reply_, request_;
  int fd_ = -1, port_ = 0;
  std::thread thread_;
};

TEST(ToolExecutors, HttpToAnAllowlistedHost) {
  TinyHttp server("HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"temp\": 21}");
  ToolConfig t = command_tool("weather", {"/bin/true"});
  t.exec.command.clear();
  t.exec.url = "http://127.0.0.1:" + std::to_string(server.port()) + "/weather/{message}";
  t.exec.headers = {{"X-Token", "abc"}};
  auto reg = registry({t});
  ASSERT_TRUE(reg);
  const ToolOutcome o = execute_tool(*reg, reg->tools()[0], json{{"message", "São Paulo/x"}}, "test");
  EXPECT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.output, "{\"temp\": 21}");
  EXPECT_EQ(server.request().rfind("POST /weather/S%C3%A3o%20Paulo%2Fx HTTP/1.0\r\n", 0), 0u) << server.request();
  EXPECT_NE(server.request().find("X-Token: abc\r\n"), std::string::npos);
  EXPECT_NE(server.request().find("{\"message\":\"São Paulo/x\"}"), std::string::npos);
}

TEST(ToolExecutors, HttpErrorStatusIsAStepError) {
  TinyHttp server("HTTP/1.0 503 Service Unavailable\r\n\r\nbusy");
  ToolConfig t = command_tool("w", {"/bin/true"});
  t.exec.command.clear();
  t.exec.url = "http://localhost:" + std::to_string(server.port()) + "/";
  auto reg = registry({t});
  ASSERT_TRUE(reg);
  const ToolOutcome o = execute_tool(*reg, reg->tools()[0], json{{"message", "x"}}, "test");
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.error, "HTTP 503");
  EXPECT_EQ(o.output, "busy");
}

// A loopback HTTP server that takes one request and never answers: it reports when the
// request has arrived and when the client has given up on it (closed the connection).
class HoldingHttp {
 public:
  HoldingHttp() {
    fd_ = listen_on_loopback(port_);
    thread_ = std::thread([this] {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[8192];
      std::string seen;
      ssize_t n;
      while ((n = recv(c, buf, sizeof(buf), 0)) > 0) {
        seen.append(buf, size_t(n));
        if (seen.find("\r\n\r\n") != std::string::npos) got_request_ = true;
      }
      abandoned_ = true;  // end of file: the client closed without an answer
      close(c);
    });
  }
  ~HoldingHttp() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  bool got_request() const { return got_request_; }
  bool abandoned() const { return abandoned_; }

 private:
  int fd_ = -1, port_ = 0;
  std::atomic<bool> got_request_{false}, abandoned_{false};
  std::thread thread_;
};

// A task's client went away: the tool it runs stops at once instead of at its timeout. A
// command is killed with what it started; an HTTP request is abandoned.
TEST(ToolExecutors, CancellationStopsARunningCommand) {
  auto reg = registry({command_tool("blocks", {"/usr/bin/setsid", "/bin/sleep", "4245.25"}, 60000)});
  ASSERT_TRUE(reg);
  std::atomic<bool> cancel{false};
  ToolOutcome o;
  std::thread run([&] {
    o = execute_tool(*reg, reg->tools()[0], json{{"message", "x"}}, "test", [&] { return cancel.load(); });
  });
  const bool started = test::wait_until([] { return test::process_with_argument("4245.25"); });
  cancel = true;
  run.join();
  ASSERT_TRUE(started) << "the command never started";
  EXPECT_EQ(o.error, "cancelled");
  EXPECT_FALSE(o.ok);
  // The supervisor's kill lands a moment after the task returns: wait for the process to go.
  EXPECT_TRUE(eventually([] { return !test::process_with_argument("4245.25"); }))
      << "the command outlived its cancelled task";
  EXPECT_EQ(reg->stats().snapshot().at("blocks").error, 1);
}

TEST(ToolExecutors, CancellationAbandonsAnHttpRequest) {
  HoldingHttp server;
  ToolConfig t = command_tool("held", {"/bin/true"}, 60000);
  t.exec.command.clear();
  t.exec.url = "http://127.0.0.1:" + std::to_string(server.port()) + "/slow";
  auto reg = registry({t});
  ASSERT_TRUE(reg);
  std::atomic<bool> cancel{false};
  ToolOutcome o;
  std::thread run([&] {
    o = execute_tool(*reg, reg->tools()[0], json{{"message", "x"}}, "test", [&] { return cancel.load(); });
  });
  const bool arrived = test::wait_until([&] { return server.got_request(); });
  cancel = true;
  run.join();
  ASSERT_TRUE(arrived) << "the request never reached the server";
  EXPECT_EQ(o.error, "cancelled");
  EXPECT_TRUE(test::wait_until([&] { return server.abandoned(); })) << "the connection was kept open";
}

// Placeholders in an http tool's host or port would let the model choose where the request
// goes (any port of an allowlisted host): refused unless the tool allows it.
TEST(ToolRegistry, PlaceholdersChooseNoHostOrPortUnlessAllowed) {
  TinyHttp server("HTTP/1.0 200 OK\r\n\r\nreached");
  ToolConfig t = command_tool("w", {"/bin/true"});
  t.exec.command.clear();
  for (const std::string url : {"http://127.0.0.1:{message}/x", "http://{message}/x", "http://{message}:80/"}) {
    t.exec.url = url;
    auto r = ToolRegistry::build({t});
    ASSERT_FALSE(r.is_ok()) << url;
    EXPECT_NE(r.status().message().find("tools[0].exec.http.url: placeholder {message} is in the host or port"),
              std::string::npos)
        << r.status().message();
  }
  t.exec.url = "http://127.0.0.1:{message}/x";
  t.exec.allow_placeholder_host_port = true;
  auto reg = registry({t});
  ASSERT_TRUE(reg);
  const ToolOutcome o = execute_tool(*reg, reg->tools()[0], json{{"message", std::to_string(server.port())}}, "t");
  EXPECT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.output, "reached");
  t.exec.url = "http://{message}/x";  // allowed: the filled host must still be on the allowlist
  reg = registry({t});
  ASSERT_TRUE(reg);
  EXPECT_EQ(execute_tool(*reg, reg->tools()[0], json{{"message", "example.com"}}, "t").error,
            "host 'example.com' is not on the http allowlist");
}

// The server's own API is never a tool's target, however the URL names it.
TEST(ToolExecutors, TheServersOwnAddressIsNeverATarget) {
  TinyHttp own("HTTP/1.0 200 OK\r\n\r\n{}");  // stands in for the server's API
  const std::string port = std::to_string(own.port());
  ToolConfig t = command_tool("self", {"/bin/true"});
  t.exec.command.clear();
  for (const ListenAddress& listening : {ListenAddress{"127.0.0.1", own.port()}, ListenAddress{"0.0.0.0", own.port()}})
    for (const std::string host : {"127.0.0.1", "localhost"}) {
      t.exec.url = "http://" + host + ":" + port + "/v1/models";
      auto reg = ToolRegistry::build({t}, {}, listening);
      ASSERT_TRUE(reg.is_ok()) << reg.status().message();
      const ToolOutcome o = execute_tool(**reg, (*reg)->tools()[0], json{{"message", "x"}}, "t");
      EXPECT_FALSE(o.ok) << listening.host << " " << host;
      EXPECT_EQ(o.error, host + ":" + port + " is this server's own listening address: refused") << o.error;
    }
  EXPECT_EQ(own.request(), "") << "the request reached the server's own address";
}

TEST(ToolExecutors, Builtins) {
  ToolConfig calc;
  calc.name = "calculator";
  calc.parameters_json = R"({"type": "object", "properties": {"expression": {"type": "string"}}})";
  calc.exec.builtin = "calculator";
  ToolConfig now = calc;
  now.name = "now";
  now.exec.builtin = "current_time";
  auto reg = registry({calc, now});
  ASSERT_TRUE(reg);
  EXPECT_EQ(execute_tool(*reg, *reg->find("calculator"), json{{"expression", "2*(3+4)^2 - 1"}}, "t").output, "97.0");
  EXPECT_EQ(execute_tool(*reg, *reg->find("calculator"), json{{"expression", "1/0"}}, "t").error,
            "expression: division by zero at offset 3");
  EXPECT_EQ(execute_tool(*reg, *reg->find("now"), json::object(), "t").output.size(), 20u);
  for (const auto& [expr, want] : std::vector<std::pair<std::string, double>>{
           {"1+2*3", 7}, {"(1+2)*3", 9}, {"-2^2", -4}, {"2^3^2", 512}, {"7%4", 3}, {" 1.5 + .5 ", 2}})
    EXPECT_DOUBLE_EQ(*evaluate_arithmetic(expr), want) << expr;
  for (const char* bad : {"", "1+", "(1", "1 2", "abc", "1/(1-1)"})
    EXPECT_FALSE(evaluate_arithmetic(bad).is_ok()) << bad;
}

TEST(ToolRegistry, BadDefinitionsNameTheKeyPath) {
  auto expect_error = [](ToolConfig t, const std::string& needle) {
    auto r = ToolRegistry::build({command_tool("ok", {"/bin/echo"}), t});
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_error(command_tool("a", {"echo", "x"}), "tools[1].exec.command[0]: must be an absolute path");
  expect_error(command_tool("a", {"/bin/echo", "{nope}"}), "tools[1].exec.command[1]: placeholder {nope}");
  ToolConfig both = command_tool("a", {"/bin/echo"});
  both.exec.builtin = "calculator";
  expect_error(both, "tools[1].exec: needs exactly one of command, http, builtin");
  ToolConfig remote = command_tool("a", {"/bin/echo"});
  remote.exec.command.clear();
  remote.exec.url = "http://example.com/x";
  expect_error(remote, "tools[1].exec.http.url: host 'example.com' is not on the http allowlist");
  ToolConfig trig = command_tool("a", {"/bin/echo"});
  trig.triggers = {"(unclosed"};
  expect_error(trig, "tools[1].triggers[0]");
  ToolConfig schema = command_tool("a", {"/bin/echo"});
  schema.parameters_json = R"({"type": "object", "properties": {"x": {"type": "string", "uniqueItems": true}}})";
  expect_error(schema, "tools[1].parameters: schema at #/properties/x: 'uniqueItems' is not supported");
  ToolConfig builtin = command_tool("a", {"/bin/echo"});
  builtin.exec.command.clear();
  builtin.exec.builtin = "rm";
  expect_error(builtin, "tools[1].exec.builtin: 'rm' is not a builtin");
}

// A tool whose schema lists no properties takes no arguments: its arguments are generated
// under additionalProperties false unless the schema says otherwise.
TEST(ToolRegistry, ArgumentsGetNoKeysTheSchemaDoesNotList) {
  ToolConfig none = command_tool("none", {"/bin/true"});
  none.parameters_json = R"({"type": "object", "properties": {}})";
  ToolConfig map = command_tool("map", {"/bin/true"});
  map.parameters_json = R"({"type": "object", "additionalProperties": {"type": "string"}})";
  auto reg = registry({none, map});
  ASSERT_TRUE(reg);
  const json& params = reg->find("none")->parameters;
  EXPECT_EQ(params["additionalProperties"], false) << params.dump();
  EXPECT_EQ(reg->find("none")->openai()["function"]["parameters"], params);  // the model is shown the same
  auto grammar = Grammar::parse(*json_schema_to_gbnf(params));
  ASSERT_TRUE(grammar.is_ok()) << grammar.status().message();
  EXPECT_TRUE(GrammarState(*grammar).advance_bytes("{}").accepting());
  EXPECT_FALSE(GrammarState(*grammar).advance_bytes("{\"path\": \"/etc\"}").accepting()) << "an invented key";
  EXPECT_EQ(reg->find("map")->parameters["additionalProperties"], json::parse(R"({"type": "string"})"));
}

class Pipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
    RuntimeOptions options;
    options.threads = 2;
    options.chat_template = "chatml";
    options.kv_memory_mib = 64;
    auto opened = Runtime::open(test::shared_path("models/stories260K.gguf"), options);
    ASSERT_TRUE(opened) << opened.status().message();
    runtime = std::move(opened).value();
    ToolConfig echo = command_tool("echo", {"/bin/echo", "{message}"});
    echo.triggers = {"^echo\\b", "repeat after me"};
    ToolConfig slow = command_tool("slow", {"/bin/sleep", "5"}, 200);
    slow.triggers = {"^wait"};
    ToolConfig loud = command_tool("loud", {"/usr/bin/yes", "{message}"}, 5000, 500);
    loud.triggers = {"^shout"};
    tools = registry({echo, slow, loud});
    ASSERT_TRUE(tools);
    pipeline = std::make_unique<TaskPipeline>(*runtime, tools, TaskOptions{});
  }

  json run(TaskRequest r) {
    auto result = pipeline->run(r);
    EXPECT_TRUE(result.is_ok()) << result.status().message();
    return result ? *result : json();
  }

  std::unique_ptr<Runtime> runtime;
  std::shared_ptr<ToolRegistry> tools;
  std::unique_ptr<TaskPipeline> pipeline;
};

TEST_F(Pipeline, TriggerCallsItsToolWithSchemaValidArguments) {
  for (uint64_t seed : {1, 2, 3}) {
    TaskRequest r;
    r.input = "Echo the word banana";
    r.seed = seed;
    r.max_steps = 1;
    const json out = run(r);
    ASSERT_EQ(out["steps"].size(), 1u) << out.dump();
    const json& step = out["steps"][0];
    EXPECT_EQ(step["tool"], "echo");
    ASSERT_TRUE(step["arguments"]["message"].is_string()) << out.dump();
    EXPECT_LE(step["arguments"]["message"].get<std::string>().size(), 64u);
    EXPECT_EQ(step["result"], step["arguments"]["message"].get<std::string>() + "\n");  // echo ran with it
    EXPECT_EQ(out["status"], "done");
  }
}

TEST_F(Pipeline, ClarifyThenTheFollowUpCompletes) {
  TaskRequest first;
  first.input = "do the thing";
  first.force_action = "clarify";
  first.seed = 4;
  const json q = run(first);
  EXPECT_EQ(q["status"], "needs_clarification") << q.dump();
  EXPECT_TRUE(q["question"].is_string());
  ASSERT_TRUE(q["session"].is_string());
  EXPECT_TRUE(pipeline->has_session(q["session"], ""));
  TaskRequest follow;
  follow.input = "repeat after me: hello";
  follow.session = q["session"];
  follow.seed = 5;
  follow.max_steps = 1;
  const json done = run(follow);
  EXPECT_EQ(done["status"], "done") << done.dump();
  EXPECT_EQ(done["session"], q["session"]);
  ASSERT_EQ(done["steps"].size(), 1u);
  EXPECT_EQ(done["steps"][0]["tool"], "echo");
  // The follow-up's prompt extends the first turn's: its KV came from the prefix cache.
  EXPECT_GT(runtime->stats().prefix_hit_tokens, 0);
  TaskRequest unknown;
  unknown.input = "x";
  unknown.session = "no-such-session";
  EXPECT_EQ(pipeline->run(unknown).status().code(), StatusCode::kNotFound);
}

TEST_F(Pipeline, ModelChoiceWithoutTriggerIsAValidDecision) {
  TaskRequest r;
  r.input = "please help";
  r.seed = 6;
  r.max_steps = 2;
  const json out = run(r);
  const std::string status = out["status"];
  EXPECT_TRUE(status == "done" || status == "needs_clarification" || status == "failed") << out.dump();
  for (const json& step : out["steps"]) EXPECT_TRUE(tools->find(step["tool"].get<std::string>())) << out.dump();
}

TEST_F(Pipeline, TimeoutAndOversizedOutputAreStepErrors) {
  TaskRequest r;
  r.input = "wait a bit";
  r.max_steps = 1;
  r.seed = 7;
  json out = run(r);
  EXPECT_EQ(out["status"], "failed");
  ASSERT_EQ(out["steps"].size(), 1u);
  EXPECT_NE(out["steps"][0]["error"].get<std::string>().find("timed out after 200 ms"), std::string::npos);
  r.input = "shout it";
  out = run(r);
  EXPECT_EQ(out["status"], "failed");
  EXPECT_NE(out["steps"][0]["error"].get<std::string>().find("output exceeds 500 bytes"), std::string::npos);
}

// A cancelled task runs no further step: here the check turns true once the first tool has
// run, and the five calls after it never happen.
TEST_F(Pipeline, CancelledTaskRunsNoFurtherStep) {
  const std::string log = test::temp_path("cancelled-steps.log");
  std::filesystem::remove(log);
  ToolConfig mark = command_tool("mark", {"/bin/sh", "-c", "echo ran >> " + log});
  mark.parameters_json = R"({"type": "object", "additionalProperties": false})";
  auto marks = registry({mark});
  ASSERT_TRUE(marks);
  TaskPipeline tasks(*runtime, marks, TaskOptions{});
  const auto steps_run = [&] {
    std::ifstream in(log);
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  };
  TaskRequest r;
  r.input = "mark it six times";
  r.force_action = "call";  // every step calls the tool: without the cancel, six would run
  r.max_steps = 6;
  r.seed = 9;
  r.cancelled = [&] { return steps_run() >= 1; };
  auto out = tasks.run(r);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ((*out)["status"], "cancelled") << out->dump();
  EXPECT_EQ((*out)["steps"].size(), 1u) << out->dump();
  EXPECT_EQ(steps_run(), 1);
  EXPECT_FALSE(tasks.has_session((*out)["session"], "")) << "a cancelled turn was kept";
  std::filesystem::remove(log);
}

TEST_F(Pipeline, AllowListHidesOtherTools) {
  const std::vector<std::string> only_slow = {"slow"};
  TaskRequest r;
  r.input = "echo this";  // echo's trigger, but echo is not allowed
  r.allowed_tools = &only_slow;
  r.force_action = "call";
  r.max_steps = 1;
  r.seed = 8;
  const json out = run(r);
  ASSERT_EQ(out["steps"].size(), 1u);
  EXPECT_EQ(out["steps"][0]["tool"], "slow");
}

}  // namespace
}  // namespace autoglm
