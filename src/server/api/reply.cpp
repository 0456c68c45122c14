#include "server/api/reply.h"

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

std::vector<std::pair<std::string, std::string>> answered_by_headers(const AnsweredBy& a) {
  std::vector<std::pair<std::string, std::string>> h{{"X-AutoGLM-Model", a.model}};
  if (a.route.empty()) return h;
  h.emplace_back("X-AutoGLM-Route", a.route);
  h.emplace_back("X-AutoGLM-Route-Reason", a.reason);
  return h;
}

void answer_now(Reply reply) {
  throw EarlyReply{std::move(reply)};
}

Reply guarded_reply(const std::function<Reply()>& handler) {
  try {
    return handler();
  } catch (const ParamError& e) {
    return error_reply(400, e.message, e.param);
  } catch (EarlyReply& e) {
    return std::move(e.reply);
  } catch (const std::exception& e) {
    return error_reply(500, std::string("internal error: ") + e.what(), "", "server_error");
  } catch (...) {
    return error_reply(500, "internal error", "", "server_error");
  }
}

std::string path_of(const std::string& target) {
  return target.substr(0, target.find('?'));
}

std::string api_key_of(const HttpRequest& request) {
  if (!request.authorization.empty()) return bearer_key(request.authorization);
  for (const auto& [name, value] : request.headers)
    if (name == "x-api-key") return value;
  return "";
}

std::string bearer_key(const std::string& authorization) {
  const std::string bearer = "Bearer ";
  return authorization.compare(0, bearer.size(), bearer) == 0 ? authorization.substr(bearer.size()) : "";
}

Reply json_reply(int status, const json& body) {
  Reply r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

// The store refused: a 503 naming it (its message names jobs.data_dir and the file). Room on a
// full disk rarely comes back within a second, so a client is told to wait longer then.
Reply store_error_reply(const std::string& what, const Status& status) {
  const bool full = status.code() == StatusCode::kResourceExhausted;
  Reply r = error_reply(
      503, what + (full ? ": the jobs storage is full (jobs.max_bytes or the disk): " : ": ") + status.message(), "",
      "service_unavailable");
  r.headers.emplace_back("Retry-After", full ? "30" : "1");
  return r;
}

}  // namespace autoglm
