#include "tasks/executors.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>

#include "tasks/calculator.h"

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

int64_t ms_left(Clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
}

ToolOutcome failure(std::string error) {
  ToolOutcome o;
  o.error = std::move(error);
  return o;
}

// Reads `fd` until end of file, the deadline or the byte cap; returns the error, if any.
std::string read_all(int fd, Clock::time_point deadline, int64_t max_bytes, std::string& out, int64_t timeout_ms) {
  char buf[4096];
  for (;;) {
    const int64_t left = ms_left(deadline);
    if (left <= 0) return "timed out after " + std::to_string(timeout_ms) + " ms";
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, int(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno != EINTR) return std::string("poll: ") + std::strerror(errno);
    if (r <= 0) continue;
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return "";
    if (int64_t(out.size()) + n > max_bytes) {
      out.append(buf, size_t(max_bytes - int64_t(out.size())));
      return "output exceeds " + std::to_string(max_bytes) + " bytes";
    }
    out.append(buf, size_t(n));
  }
}

// argv runs as given (execve, no shell): a value with ';', '$(...)' or newlines is one argument.
ToolOutcome run_command(const ToolExec& e, const json& args) {
  std::vector<std::string> argv;
  for (const std::string& a : e.command) argv.push_back(fill_placeholders(a, args, false));
  std::vector<std::string> env;
  for (const std::string& name : e.env)
    if (const char* v = std::getenv(name.c_str())) env.push_back(name + "=" + v);
  std::vector<char*> argv_c, env_c;
  for (auto& a : argv) argv_c.push_back(a.data());
  argv_c.push_back(nullptr);
  for (auto& v : env) env_c.push_back(v.data());
  env_c.push_back(nullptr);

  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return failure(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    return failure(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {  // child: only async-signal-safe calls until execve
    setpgid(0, 0);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(out[1], 1);
    dup2(out[1], 2);
    if (!e.cwd.empty() && chdir(e.cwd.c_str()) != 0) _exit(126);
    execve(argv_c[0], argv_c.data(), env_c.data());
    _exit(127);
  }
  close(out[1]);
  setpgid(pid, pid);  // also here: no race with the child's own call
  ToolOutcome o;
  const auto deadline = Clock::now() + std::chrono::milliseconds(e.timeout_ms);
  o.error = read_all(out[0], deadline, e.max_output_bytes, o.output, e.timeout_ms);
  close(out[0]);
  if (!o.error.empty()) kill(-pid, SIGKILL);  // the whole process group
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (o.error.empty()) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
      o.error = "could not run " + argv[0];
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 126)
      o.error = "could not enter " + e.cwd;
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
      o.error = "exited with status " + std::to_string(WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
      o.error = "killed by signal " + std::to_string(WTERMSIG(status));
  }
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

ToolOutcome execute_tool(const ToolRegistry& registry, const Tool& tool, const json& arguments,
                         const std::string& who) {
  const auto start = Clock::now();
  const ToolExec& e = tool.config.exec;
  ToolOutcome o = !e.command.empty() ? run_command(e, arguments)
                  : !e.url.empty()   ? run_http(registry, e, arguments)
                                     : run_builtin(e, arguments);
  o.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  registry.stats().record(tool.config.name, o.ok, o.ms / 1000.0);
  std::fprintf(stderr, "tool call: who=%s tool=%s arguments=%s status=%s%s%s duration_ms=%.1f\n", who.c_str(),
               tool.config.name.c_str(), arguments.dump().c_str(), o.ok ? "ok" : "error",
               o.ok ? "" : " error=", o.ok ? "" : json(o.error).dump().c_str(), o.ms);
  return o;
}

}  // namespace autoglm
