#include "server/jobs/batch_input.h"

#include <set>

#include <nlohmann/json.hpp>

namespace autoglm {
namespace {

using json = nlohmann::ordered_json;

bool blank(const std::string& s) {
  return s.find_first_not_of(" \t\r") == std::string::npos;
}

Result<BatchLine> parse_line(const std::string& text, int64_t number) {
  const std::string where = "line " + std::to_string(number) + ": ";
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument(where + "not a JSON object");
  BatchLine line;
  line.line = number;
  if (!j.contains("custom_id") || !j["custom_id"].is_string() || j["custom_id"].get<std::string>().empty())
    return invalid_argument(where + "'custom_id' must be a non-empty string");
  line.custom_id = j["custom_id"];
  if (j.value("method", json()) != "POST") return invalid_argument(where + "'method' must be \"POST\"");
  if (!j.contains("url") || !j["url"].is_string() ||
      (j["url"] != "/v1/chat/completions" && j["url"] != "/v1/completions"))
    return invalid_argument(where + "'url' must be \"/v1/chat/completions\" or \"/v1/completions\"");
  line.url = j["url"];
  if (!j.contains("body") || !j["body"].is_object()) return invalid_argument(where + "'body' must be an object");
  if (j["body"].value("stream", false)) return invalid_argument(where + "'body.stream' must not be true in a batch");
  line.body = j["body"].dump();
  return line;
}

}  // namespace

Result<std::vector<BatchLine>> parse_batch_input(const std::string& jsonl) {
  std::vector<BatchLine> lines;
  std::set<std::string> seen;
  int64_t number = 0;
  for (size_t at = 0; at < jsonl.size();) {
    size_t eol = jsonl.find('\n', at);
    if (eol == std::string::npos) eol = jsonl.size();
    const std::string text = jsonl.substr(at, eol - at);
    at = eol + 1;
    ++number;
    if (blank(text)) continue;
    AUTOGLM_ASSIGN_OR_RETURN(BatchLine line, parse_line(text, number));
    if (!lines.empty() && line.url != lines.front().url)
      return invalid_argument("line " + std::to_string(number) + ": 'url' " + line.url + " differs from line " +
                              std::to_string(lines.front().line) + "'s " + lines.front().url +
                              " (a batch has one endpoint)");
    if (!seen.insert(line.custom_id).second)
      return invalid_argument("line " + std::to_string(number) + ": 'custom_id' \"" + line.custom_id +
                              "\" is used by an earlier line");
    if (int64_t(lines.size()) == kMaxBatchLines)
      return invalid_argument("line " + std::to_string(number) + ": a batch holds at most " +
                              std::to_string(kMaxBatchLines) + " requests");
    lines.push_back(std::move(line));
  }
  if (lines.empty()) return invalid_argument("the file holds no requests (one JSON object per line)");
  return lines;
}

}  // namespace autoglm
