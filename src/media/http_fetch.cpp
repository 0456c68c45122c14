#include "media/http_fetch.h"

#include <boost/asio.hpp>
#include <boost/beast.hpp>

namespace autoglm {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

Result<HttpUrl> parse_http_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0)
    return invalid_argument(url.rfind("https://", 0) == 0
                                ? "https image URLs are not fetched (this build has no TLS): send the image as a "
                                  "data: URL"
                                : "'" + url.substr(0, 40) + "' is not an http:// URL");
  HttpUrl u;
  const size_t start = scheme.size(), slash = url.find_first_of("/?#", start);
  std::string authority = url.substr(start, slash - start);
  if (slash != std::string::npos) u.target = url.substr(slash);
  if (!u.target.empty() && u.target[0] != '/') u.target = "/" + u.target;
  if (authority.find('@') != std::string::npos) return invalid_argument("image URLs may not carry credentials");
  const size_t colon = authority.rfind(':');
  if (colon != std::string::npos && authority.find(']') == std::string::npos) {
    u.port = authority.substr(colon + 1);
    authority.resize(colon);
    if (u.port.empty() || u.port.size() > 5 || u.port.find_first_not_of("0123456789") != std::string::npos)
      return invalid_argument("the image URL has a bad port");
  }
  if (authority.empty()) return invalid_argument("the image URL has no host");
  u.host = authority;
  return u;
}

Result<std::string> http_get(const HttpUrl& url, int64_t max_bytes, double timeout_s) {
  const std::string what = "http://" + url.host + ":" + url.port + url.target;
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  const auto timeout = std::chrono::milliseconds(int64_t(timeout_s * 1000));
  beast::error_code ec;
  tcp::resolver resolver(ioc);
  const auto endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) return io_error(what + ": cannot resolve the host (" + ec.message() + ")");
  stream.expires_after(timeout);
  stream.connect(endpoints, ec);
  if (ec) return io_error(what + ": cannot connect (" + ec.message() + ")");
  http::request<http::empty_body> req(http::verb::get, url.target, 11);
  req.set(http::field::host, url.host);
  req.set(http::field::user_agent, "autoglm");
  stream.expires_after(timeout);
  http::write(stream, req, ec);
  if (ec) return io_error(what + ": " + ec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(uint64_t(max_bytes));
  stream.expires_after(timeout);
  http::read(stream, buffer, parser, ec);
  if (ec == http::error::body_limit)
    return invalid_argument(what + ": the image is larger than " + std::to_string(max_bytes) + " bytes");
  if (ec) return io_error(what + ": " + ec.message());
  const unsigned status = parser.get().result_int();
  if (status != 200)
    return io_error(what + ": the server answered " + std::to_string(status) +
                    (status >= 300 && status < 400 ? " (redirects are not followed)" : ""));
  return std::move(parser.get().body());
}

}  // namespace autoglm
