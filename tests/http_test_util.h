// A blocking HTTP/1.1 client for the server tests, and a reader of /metrics samples.
#pragma once

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

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

inline HttpResult http_call(int port, const std::string& method, const std::string& target,
                            const std::string& body = "",
                            const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  namespace net = boost::asio;
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), uint16_t(port)));
  http::request<http::string_body> req(http::string_to_verb(method), target, 11);
  req.set(http::field::host, "localhost");
  req.set(http::field::content_type, "application/json");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  beast::error_code ec;
  http::read(stream, buffer, res, ec);
  HttpResult r;
  r.status = res.result_int();
  r.body = res.body();
  for (const auto& field : res) r.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  return r;
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
