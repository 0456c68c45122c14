// The input file of a batch, in OpenAI's format: JSON Lines, one request per line, each
// {"custom_id": "...", "method": "POST", "url": "/v1/chat/completions", "body": {...}}. Checked
// line by line when it is uploaded; an error names the line and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autoglm/status.h"

namespace autoglm {

struct BatchLine {
  int64_t line = 0;  // 1-based, in the file
  std::string custom_id;
  std::string url;   // /v1/chat/completions or /v1/completions, the same on every line
  std::string body;  // the request body (a JSON object's text)
};

inline constexpr int64_t kMaxBatchLines = 50000;  // as OpenAI's

// Blank lines are skipped; custom_ids are unique; at least one request.
Result<std::vector<BatchLine>> parse_batch_input(const std::string& jsonl);

}  // namespace autoglm
