#include "tasks/executors.h"

#include <filesystem>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <ctime>
#include <optional>

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
ToolOutcome run_command(const ToolExec& e, const json& args, const CancelCheck& cancelled) {
  CommandSpec spec;
  for (const std::string& a : e.command) spec.argv.push_back(fill_placeholders(a, args, false));
  for (const std::string& name : e.env)
    if (const char* v = std::getenv(name.c_str())) spec.env.push_back(name + "=" + v);
  spec.cwd = e.cwd;
  spec.timeout_ms = e.timeout_ms;
  spec.max_output_bytes = e.max_output_bytes;
  spec.cancelled = cancelled;
  CommandResult r = run_confined(spec);
  ToolOutcome o;
  o.output = std::move(r.output);
  o.error = std::move(r.error);
  o.ok = o.error.empty();
  return o;
}

// A TCP endpoint: family, address bytes (4 or 16, network order), port.
struct Endpoint {
  int family = 0;
  std::array<unsigned char, 16> address{};
  uint16_t port = 0;
  bool wildcard() const {
    return std::all_of(address.begin(), address.end(), [](unsigned char b) { return b == 0; });
  }
};

Endpoint endpoint_of(const sockaddr* a) {
  Endpoint e;
  e.family = a->sa_family;
  if (a->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(a);
    std::memcpy(e.address.data(), &v4->sin_addr, 4);
    e.port = ntohs(v4->sin_port);
  } else if (a->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(a);
    std::memcpy(e.address.data(), &v6->sin6_addr, 16);
    e.port = ntohs(v6->sin6_port);
  }
  return e;
}

// Whether `a` is an address of this machine: only those can be bound.
bool is_local_address(const sockaddr* a, socklen_t len) {
  const int fd = socket(a->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_storage copy{};
  std::memcpy(&copy, a, len);
  reinterpret_cast<sockaddr_in*>(&copy)->sin_port = 0;  // same offset in sockaddr_in6
  const bool local = bind(fd, reinterpret_cast<sockaddr*>(&copy), len) == 0;
  close(fd);
  return local;
}

// The server's own listening address as an endpoint (its host is an IP address).
std::optional<Endpoint> listener_of(const std::optional<ListenAddress>& own) {
  if (!own) return std::nullopt;
  Endpoint e;
  e.port = uint16_t(own->port);
  if (inet_pton(AF_INET, own->host.c_str(), e.address.data()) == 1) {
    e.family = AF_INET;
  } else if (inet_pton(AF_INET6, own->host.c_str(), e.address.data()) == 1) {
    e.family = AF_INET6;
  } else {
    return std::nullopt;
  }
  return e;
}

// Whether connecting to `a` would reach the server's own API: its address and port, or any
// address of this machine when it listens on all of them (0.0.0.0, ::).
bool reaches_own_listener(const addrinfo& a, const std::optional<Endpoint>& own) {
  const Endpoint target = endpoint_of(a.ai_addr);
  if (!own || own->port != target.port) return false;
  if (own->family == target.family && own->address == target.address) return true;
  return own->wildcard() && is_local_address(a.ai_addr, a.ai_addrlen);
}

int connect_with_timeout(const std::string& host, const std::string& port, Clock::time_point deadline,
                         const std::optional<Endpoint>& own_api, const CancelCheck& cancelled, std::string& error) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    error = "cannot resolve " + host + ": " + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  bool own = false;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    if (reaches_own_listener(*a, own_api)) {  // a tool never calls this server's own API
      own = true;
      continue;
    }
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      close(fd);
      fd = -1;
      continue;
    }
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    if (!wait_ready(fd, POLLOUT, deadline, cancelled) || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0 ||
        soerr != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0)
    error = cancelled && cancelled() ? kCancelledError
            : own                    ? host + ":" + port + " is this server's own listening address: refused"
                                     : "cannot connect to " + host + ":" + port;
  return fd;
}

// HTTP/1.0 (no chunked replies) to an allowlisted host; POST/PUT send the arguments as JSON.
ToolOutcome run_http(const ToolRegistry& registry, const ToolExec& e, const json& args, const CancelCheck& cancelled) {
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
  const int fd = connect_with_timeout(host, port, deadline, listener_of(registry.own_address()), cancelled, error);
  if (fd < 0) return failure(error);
  const bool with_body = e.method == "POST" || e.method == "PUT";
  const std::string body = with_body ? args.dump() : "";
  std::string req = e.method + " " + path + " HTTP/1.0\r\nHost: " + hostport + "\r\nConnection: close\r\n";
  for (const auto& [k, v] : e.headers) req += k + ": " + v + "\r\n";
  if (with_body) req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  for (size_t sent = 0; sent < req.size();) {
    if (!wait_ready(fd, POLLOUT, deadline, cancelled)) {
      close(fd);
      if (cancelled && cancelled()) return failure(kCancelledError);
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
  error = read_all(fd, deadline, e.max_output_bytes + 16384, reply, e.timeout_ms, cancelled);
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

// `text` as a path resolved (.., symlinks) under `root`, or why it is not under it.
Result<std::string> confined_path(const std::string& root_dir, const std::string& text, const std::string& where) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(root_dir, ec);
  const fs::path resolved = fs::weakly_canonical(root / fs::path(text), ec);  // an absolute value replaces root
  if (ec) return invalid_argument(where + "cannot resolve '" + text + "': " + ec.message());
  const auto [end_root, unused] = std::mismatch(root.begin(), root.end(), resolved.begin(), resolved.end());
  if (end_root != root.end()) return invalid_argument(where + "'" + text + "' resolves outside " + root.string());
  return resolved.string();
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
  const ToolExec& e = tool.config.exec;
  const bool command = !e.command.empty();
  for (auto& [name, value] : out.items()) {
    const auto rule_it = tool.config.arguments.find(name);
    const ArgumentRule rule = rule_it == tool.config.arguments.end() ? ArgumentRule{} : rule_it->second;
    const std::string text = value_text(value);
    const std::string where = "tool '" + tool.config.name + "', parameter '" + name + "': ";
    if (command && !rule.allow_leading_dash && !text.empty() && text[0] == '-')
      return invalid_argument(where +
                              "a value starting with '-' is refused (it would reach the command as an option; " +
                              "arguments." + name + ".allow_leading_dash allows it)");
    if (!rule.path_under.empty()) {
      AUTOGLM_ASSIGN_OR_RETURN(value, confined_path(rule.path_under, text, where));  // the command gets it resolved
    } else if (command && !e.cwd.empty() && !rule.not_a_path) {
      // Checked, not rewritten: the command runs in cwd, where the value means the same path.
      auto checked = confined_path(e.cwd, text, where);
      if (!checked)
        return Status(checked.status().code(), checked.status().message() + " (the tool's cwd; arguments." + name +
                                                   ".not_a_path: true if the value is not a path)");
    }
  }
  return out;
}

ToolOutcome execute_tool(const ToolRegistry& registry, const Tool& tool, const json& arguments, const std::string& who,
                         const CancelCheck& cancelled) {
  const auto start = Clock::now();
  const ToolExec& e = tool.config.exec;
  auto checked = checked_arguments(tool, arguments);
  ToolOutcome o = !checked             ? failure(checked.status().message())
                  : !e.command.empty() ? run_command(e, *checked, cancelled)
                  : !e.url.empty()     ? run_http(registry, e, *checked, cancelled)
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
