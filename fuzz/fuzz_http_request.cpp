// HTTP bytes -> a request read with the server's limits and buffer -> the typed OpenAI
// request of its route. Only ParamError (a 400) or a Beast error may come out.
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "server/api/openai_request.h"
#include "server/http/http_limits.h"

namespace beast = boost::beast;
namespace http = beast::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  boost::asio::io_context ioc;
  beast::test::stream client(ioc), server(ioc);
  client.connect(server);
  client.append(beast::string_view(reinterpret_cast<const char*>(data), size));
  client.close();
  const autoglm::ServerConfig config;
  beast::flat_buffer buffer(autoglm::kMaxUnparsedBytes);
  // Keep-alive: read requests until the bytes run out or one is refused, as a session does.
  for (int i = 0; i < 8; ++i) {
    http::request_parser<autoglm::ArrivingStringBody> parser;
    autoglm::apply_request_limits(parser, config.max_body_bytes);
    beast::error_code ec;
    http::read(server, buffer, parser, ec);
    if (ec) break;
    const auto& req = parser.get();
    try {
      const auto body = autoglm::parse_body(req.body(), config.runtime.limits);
      if (req.target() == "/v1/chat/completions") autoglm::parse_chat_request(body, config);
      if (req.target() == "/v1/completions") autoglm::parse_completion_request(body, config);
    } catch (const autoglm::ParamError&) {
    }
    if (!req.keep_alive()) break;
  }
  return 0;
}
