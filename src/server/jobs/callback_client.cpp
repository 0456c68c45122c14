#include "server/jobs/callback_client.h"

#include <algorithm>
#include <chrono>

#include <boost/asio.hpp>
#include <boost/beast.hpp>

namespace autoglm {

Result<CallbackUrl> parse_callback_url(const std::string& url, const std::vector<std::string>& allowlist) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return invalid_argument("'callback_url' must be an http:// URL");
  const std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  CallbackUrl u;
  u.target = slash == std::string::npos ? "/" : rest.substr(slash);
  if (authority.find('@') != std::string::npos) return invalid_argument("'callback_url' must not carry credentials");
  if (!authority.empty() && authority.front() == '[') {  // [v6]:port
    const size_t close = authority.find(']');
    if (close == std::string::npos) return invalid_argument("'callback_url' has a malformed IPv6 host");
    u.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') u.port = authority.substr(close + 2);
  } else {
    const size_t colon = authority.rfind(':');
    u.host = authority.substr(0, colon);
    if (colon != std::string::npos) u.port = authority.substr(colon + 1);
  }
  if (u.host.empty()) return invalid_argument("'callback_url' has no host");
  if (u.port.empty() || u.port.size() > 5 || !std::all_of(u.port.begin(), u.port.end(), ::isdigit))
    return invalid_argument("'callback_url' has a bad port");
  static const std::vector<std::string> kLoopback = {"127.0.0.1", "::1", "localhost"};
  const auto& allowed = allowlist.empty() ? kLoopback : allowlist;
  if (std::find(allowed.begin(), allowed.end(), u.host) == allowed.end())
    return invalid_argument("'callback_url' host '" + u.host + "' is not in jobs.callback_allowlist");
  return u;
}

CallbackOutcome post_callback(const CallbackUrl& url, const std::string& body,
                              const std::vector<std::pair<std::string, std::string>>& headers, double timeout_s) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  namespace net = boost::asio;
  CallbackOutcome out;
  try {
    net::io_context ioc;
    net::ip::tcp::resolver resolver(ioc);
    beast::tcp_stream stream(ioc);
    const auto timeout = std::chrono::milliseconds(int64_t(timeout_s * 1000));
    stream.expires_after(timeout);
    stream.connect(resolver.resolve(url.host, url.port));
    http::request<http::string_body> req(http::verb::post, url.target, 11);
    req.set(http::field::host, url.host);
    req.set(http::field::content_type, "application/json");
    req.set(http::field::user_agent, "open-autoglm");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    out.http_status = res.result_int();
    if (out.http_status < 200 || out.http_status >= 300)
      out.error = "the receiver answered " + std::to_string(out.http_status) +
                  (out.http_status >= 300 && out.http_status < 400 ? " (redirects are not followed)" : "");
    beast::error_code ec;
    stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

}  // namespace autoglm
