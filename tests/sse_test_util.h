// Reading a server-sent events body in tests: its data lines, and its events as (name, JSON).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace autoglm::test {

// The data lines of an SSE body.
inline std::vector<std::string> sse_data_lines(const std::string& body) {
  std::vector<std::string> out;
  for (size_t at = 0; (at = body.find("data: ", at)) != std::string::npos;) {
    const size_t end = body.find("\n\n", at);
    out.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return out;
}

// Each event's name ("" without an `event:` line) and its data as JSON.
inline std::vector<std::pair<std::string, nlohmann::json>> sse_events(const std::string& body) {
  std::vector<std::pair<std::string, nlohmann::json>> out;
  for (size_t at = 0; at < body.size();) {
    size_t end = body.find("\n\n", at);
    if (end == std::string::npos) end = body.size();
    const std::string block = body.substr(at, end - at);
    at = end + 2;
    std::string name, data;
    for (size_t line = 0; line < block.size();) {
      size_t stop = block.find('\n', line);
      if (stop == std::string::npos) stop = block.size();
      const std::string text = block.substr(line, stop - line);
      if (text.rfind("event: ", 0) == 0) name = text.substr(7);
      if (text.rfind("data: ", 0) == 0) data = text.substr(6);
      line = stop + 1;
    }
    if (!data.empty()) out.emplace_back(name, nlohmann::json::parse(data, nullptr, false));
  }
  return out;
}

}  // namespace autoglm::test
