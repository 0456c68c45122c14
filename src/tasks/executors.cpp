#include "tasks/executors.h"

#include <filesystem>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>

#include "core/log.h"
#include "tasks/calculator.h"
#include "tasks/fd_read.h"
#include "tasks/subprocess.h"

namespace autoglm {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string value_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  return v.dump();
}

std::string percent_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += char(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

ToolOutcome failure(std::string error) {
  ToolOutcome o;
  o.error = std::move(error);
  return o;
}

// argv runs as given (execve, no shell): a value with ';', '$(...)' or newlines is one argument.
ToolOutcome run_command(const ToolExec& e, const json& args) {
  CommandSpec spec;
  for (const std::string& a : e.command) spec.argv.push_back(fill_placeholders(a, args, false));
  for (const std::string& name : e.env)
    if (const char* v = std::getenv(name.c_str())) spec.env.push_back(name + "=" + v);
  spec.cwd = e.cwd;
  spec.timeout_ms = e.timeout_ms;
  spec.max_output_bytes = e.max_output_bytes;
  CommandResult r = run_confined(spec);
  ToolOutcome o;
  o.output = std::move(r.output);
  o.error = std::move(r.error);
  o.ok = o.error.empty();
  return o;
}

int connect_with_timeout(const std::string& host, const std::string& port, Clock::time_point deadline,
                         std::string& error) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    error = "cannot resolve " + host + ": " + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      close(fd);
      fd = -1;
      continue;
    }
    pollfd p{fd, POLLOUT, 0};
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    if (poll(&p, 1, int(std::max<int64_t>(0, ms_left(deadline)))) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0 || soerr != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) error = "cannot connect to " + host + ":" + port;
  return fd;
}

// HTTP/1.0 (no chunked replies) to an allowlisted host; POST/PUT send the arguments as JSON.
ToolOutcome run_http(const ToolRegistry& registry, const ToolExec& e, const json& args) {
  const std::string url = fill_placeholders(e.url, args, true);
  const std::string host = url_host(url);
  const auto& allow = registry.http_allowlist();
  if (std::find(allow.begin(), allow.end(), host) == allow.end())
    return failure("host '" + host + "' is not on the http allowlist");
  const size_t authority = std::string("http://").size();
  const size_t path_at = url.find('/', authority);
  const std::string hostport =
      url.substr(authority, path_at == std::string::npos ? std::string::npos : path_at - authority);
  const std::string path = path_at == std::string::npos ? "/" : url.substr(path_at);
  std::string port = "80";
  if (!hostport.empty() && hostport[0] == '[') {  // [v6] or [v6]:port
    const size_t rb = hostport.find(']');
    if (rb != std::string::npos && rb + 1 < hostport.size() && hostport[rb + 1] == ':') port = hostport.substr(rb + 2);
  } else if (const size_t colon = hostport.rfind(':'); colon != std::string::npos) {
    port = hostport.substr(colon + 1);
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(e.timeout_ms);
  std::string error;
  const int fd = connect_with_timeout(host, port, deadline, error);
  if (fd < 0) return failure(error);
  const bool with_body = e.method == "POST" || e.method == "PUT";
  const std::string body = with_body ? args.dump() : "";
  std::string req = e.method + " " + path + " HTTP/1.0\r\nHost: " + hostport + "\r\nConnection: close\r\n";
  for (const auto& [k, v] : e.headers) req += k + ": " + v + "\r\n";
  if (with_body) req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  for (size_t sent = 0; sent < req.size();) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, int(std::max<int64_t>(0, ms_left(deadline)))) != 1) {
      close(fd);
      return failure("timed out after " + std::to_string(e.timeout_ms) + " ms");
    }
    const ssize_t n = send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      close(fd);
      return failure(std::string("send: ") + std::strerror(errno));
    }
    sent += size_t(n);
  }
  std::string reply;
  error = read_all(fd, deadline, e.max_output_bytes + 16384, reply, e.timeout_ms);
  close(fd);
  if (!error.empty()) return failure(error);
  const size_t head_end = reply.find("\r\n\r\n");
  if (reply.compare(0, 5, "HTTP/") != 0 || head_end == std::string::npos) return failure("not an HTTP reply");
  const int status = std::atoi(reply.c_str() + reply.find(' ') + 1);
  ToolOutcome o;
  o.output = reply.substr(head_end + 4);
  if (int64_t(o.output.size()) > e.max_output_bytes) {
    o.output.resize(size_t(e.max_output_bytes));
    return failure("output exceeds " + std::to_string(e.max_output_bytes) + " bytes");
  }
  if (status < 200 || status > 299) o.error = "HTTP " + std::to_string(status);
  o.ok = o.error.empty();
  return o;
}

ToolOutcome run_builtin(const ToolExec& e, const json& args) {
  ToolOutcome o;
  if (e.builtin == "calculator") {
    auto v = evaluate_arithmetic(value_text(args.value("expression", json(""))));
    if (!v) return failure(v.status().message());
    o.output = json(*v).dump();
  } else if (e.builtin == "current_time") {
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc);
    o.output = buf;
  } else {  // echo
    o.output = value_text(args.value("message", json("")));
  }
  o.ok = true;
  return o;
}

}  // namespace

std::string fill_placeholders(const std::string& text, const json& arguments, bool url_encode) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t open = text.find('{', i), close = open == std::string::npos ? open : text.find('}', open);
    if (open == std::string::npos || close == std::string::npos) {
      out += text.substr(i);
      break;
    }
    out += text.substr(i, open - i);
    const std::string name = text.substr(open + 1, close - open - 1);
    const std::string value = value_text(arguments.is_object() ? arguments.value(name, json()) : json());
    out += url_encode ? percent_encode(value) : value;
    i = close + 1;
  }
  return out;
}

Result<json> checked_arguments(const Tool& tool, const json& arguments) {
  json out = arguments;
  if (!arguments.is_object()) return out;
  const bool command = !tool.config.exec.command.empty();
  for (auto& [name, value] : out.items()) {
    const auto rule_it = tool.config.arguments.find(name);
    const ArgumentRule rule = rule_it == tool.config.arguments.end() ? ArgumentRule{} : rule_it->second;
    const std::string text = value_text(value);
    const std::string where = "tool '" + tool.config.name + "', parameter '" + name + "': ";
    if (command && !rule.allow_leading_dash && !text.empty() && text[0] == '-')
      return invalid_argument(where +
                              "a value starting with '-' is refused (it would reach the command as an option; " +
                              "arguments." + name + ".allow_leading_dash allows it)");
    if (rule.path_under.empty()) continue;
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path root = fs::weakly_canonical(rule.path_under, ec);
    const fs::path resolved = fs::weakly_canonical(root / fs::path(text), ec);  // an absolute value replaces root
    if (ec) return invalid_argument(where + "cannot resolve '" + text + "': " + ec.message());
    const auto [end_root, unused] = std::mismatch(root.begin(), root.end(), resolved.begin(), resolved.end());
    if (end_root != root.end()) return invalid_argument(where + "'" + text + "' resolves outside " + root.string());
    value = resolved.string();  // the command gets the resolved path
  }
  return out;
}

ToolOutcome execute_tool(const ToolRegistry& registry, const Tool& tool, const json& arguments,
                         const std::string& who) {
  const auto start = Clock::now();
  const ToolExec& e = tool.config.exec;
  auto checked = checked_arguments(tool, arguments);
  ToolOutcome o = !checked             ? failure(checked.status().message())
                  : !e.command.empty() ? run_command(e, *checked)
                  : !e.url.empty()     ? run_http(registry, e, *checked)
                                       : run_builtin(e, *checked);
  o.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  registry.stats().record(tool.config.name, o.ok, o.ms / 1000.0);
  char ms[32];
  std::snprintf(ms, sizeof(ms), "%.1f", o.ms);
  log_line(LogLevel::kInfo, "tool call: who=" + who + " tool=" + tool.config.name + " arguments=" + arguments.dump() +
                                " status=" + (o.ok ? "ok" : "error") + (o.ok ? "" : " error=" + json(o.error).dump()) +
                                " duration_ms=" + ms);
  return o;
}

}  // namespace autoglm
