// json_reply and store_error_reply are defined beside the jobs routes (api_jobs.cpp).
#include "server/reply.h"

namespace autoglm {

Reply busy_reply(const std::string& message) {
  Reply r = error_reply(429, message, "", "rate_limit_error");
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

Reply error_reply(int status, const std::string& message, const std::string& param, const std::string& type) {
  Reply r;
  r.status = status;
  json err = {
      {"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)}, {"code", nullptr}};
  if (status == 401) err["code"] = "invalid_api_key";
  if (status == 404) err["code"] = "not_found";
  if (status == 429) err["code"] = "rate_limit_exceeded";
  // Messages may quote the client's bytes: never let them break the JSON.
  r.body = json{{"error", err}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

}  // namespace autoglm
