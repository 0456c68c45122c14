// A blocking HTTP/1.1 client for the server tests, a reader of reply fields that never throws,
// and a reader of /metrics samples.
#pragma once

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <nlohmann/json.hpp>

namespace autoglm::test {

struct HttpResult {
  int status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string header(const std::string& name) const {
    for (const auto& [k, v] : headers)
      if (boost::beast::iequals(k, name)) return v;
    return "";
  }
  nlohmann::json j() const { return nlohmann::json::parse(body, nullptr, false); }
};

// Never throws (tests call it from their client threads, where a throw aborts the binary): a
// transport failure (refused, reset, no reply) is status 0 with the error as the body.
inline HttpResult http_call(int port, const std::string& method, const std::string& target,
                            const std::string& body = "",
                            const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  namespace net = boost::asio;
  HttpResult r;
  try {
    net::io_context ioc;
    beast::tcp_stream stream(ioc);
    beast::error_code connect_ec, write_ec, read_ec;
    stream.connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), uint16_t(port)), connect_ec);
    if (connect_ec) {
      r.body = "transport error: connect: " + connect_ec.message();
      return r;
    }
    http::request<http::string_body> req(http::string_to_verb(method), target, 11);
    req.set(http::field::host, "localhost");
    req.set(http::field::content_type, "application/json");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    // A write cut short may still have a reply (a server that refuses before the body): read it.
    http::write(stream, req, write_ec);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.eager(true);
    http::read(stream, buffer, parser, read_ec);
    if (read_ec && !parser.is_header_done()) {  // no reply at all (an empty response would read as 200)
      r.body = "transport error: " + (write_ec ? "write: " + write_ec.message() + ", " : std::string()) +
               "read: " + read_ec.message();
      return r;
    }
    // A reply cut short keeps what arrived (a stream ended by the server's stop).
    const auto& res = parser.get();
    r.status = res.result_int();
    r.body = res.body();
    for (const auto& field : res) r.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  } catch (const std::exception& e) {
    r = HttpResult{};
    r.body = std::string("transport error: ") + e.what();
  }
  return r;
}

// The string at a JSON pointer ("/choices/0/text") of a reply's body with status `ok`. Anything
// else (another status, no such field, not a string) records a test failure naming the status
// and body and gives "": it never throws, so it is safe in a client thread.
inline std::string string_at(const HttpResult& r, const std::string& pointer, int ok = 200) {
  try {
    const nlohmann::json j = r.j();
    const nlohmann::json::json_pointer at(pointer);
    if (r.status == ok && !j.is_discarded() && j.contains(at) && j[at].is_string()) return j[at].get<std::string>();
  } catch (const std::exception& e) {
    ADD_FAILURE() << pointer << ": " << e.what();
    return "";
  }
  ADD_FAILURE() << "no string at " << pointer << " in a reply with status " << r.status << ": " << r.body;
  return "";
}

// The sum of a metric's samples whose labels include the given ones ("name" or
// "name{k=\"v\",...}") in exposition text; -1 when it has none.
inline double metric_in(const std::string& text, const std::string& selector) {
  const size_t brace = selector.find('{');
  const std::string name = selector.substr(0, brace);
  std::vector<std::string> wanted;
  if (brace != std::string::npos) {
    std::stringstream labels(selector.substr(brace + 1, selector.size() - brace - 2));
    for (std::string l; std::getline(labels, l, ',');) wanted.push_back(l);
  }
  double sum = 0;
  bool found = false;
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    const char next = line[name.size()];
    if (next != ' ' && next != '{') continue;
    const size_t value_at = line.rfind(' ');
    const std::string labels = next == '{' ? line.substr(name.size(), value_at - name.size()) : "";
    const auto has = [&](const std::string& l) {
      for (const char* before : {"{", ","})
        for (const char* after : {",", "}"})
          if (labels.find(before + l + after) != std::string::npos) return true;
      return false;
    };
    if (!std::all_of(wanted.begin(), wanted.end(), has)) continue;
    sum += std::stod(line.substr(value_at + 1));
    found = true;
  }
  return found ? sum : -1;
}

}  // namespace autoglm::test
