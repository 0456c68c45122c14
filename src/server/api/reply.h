// An HTTP request as the API reads it, and the reply it answers with (a whole body, or a
// generation's events turned into chunks as they come); the replies every route builds alike.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autoglm/engine.h"
#include "autoglm/status.h"
#include "server/api/choice_streams.h"
#include "server/api/request_params.h"
#include "server/api/response_writer.h"

namespace autoglm {

struct HttpRequest {
  std::string method;
  std::string target;         // path and query
  std::string authorization;  // the Authorization header
  std::string body;
  std::string client_address;  // the peer's IP address (rate limits without API keys)
  std::string origin;          // the Origin header (CORS)
  std::string cache_control;   // the Cache-Control header (no-cache bypasses the response cache)
  // Every header, names lower-case (routes look at them: rules, sticky arms, the arm override).
  std::vector<std::pair<std::string, std::string>> headers;
  // Holds `bytes` more for this request from the server's body budget (the memory of its
  // parsed body); false when the budget cannot take them. Unset: nothing to hold.
  std::function<bool(int64_t bytes)> hold_memory;
};

// Which model answered a generation, and through which route (empty: asked for by name) and
// why: the X-AutoGLM-* headers and the access log are both made from it.
struct AnsweredBy {
  std::string model, route, reason;
};
std::vector<std::pair<std::string, std::string>> answered_by_headers(const AnsweredBy& answered);

// The key of an `Authorization: Bearer KEY` header; empty without one.
std::string bearer_key(const std::string& authorization);
// The caller's API key: Authorization's bearer key, else the x-api-key header (Anthropic's
// clients send that); empty without either.
std::string api_key_of(const HttpRequest& request);
// A request target without its query.
std::string path_of(const std::string& target);

struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Generation: events of `stream` go to `consume`, which says what to send now, and
  // whether (and with which status) the reply is whole. `streaming`: SSE, sent as it comes.
  std::shared_ptr<ChoiceStreams> stream;
  bool streaming = false;
  std::function<ReplyChunk(const StreamEvent&, size_t choice)> consume;
  AnsweredBy answered_by;  // a generation's (its headers are among `headers`)
  // What is known only once the first event is in (a cascade's model, a task's Retry-After): a
  // stream's head waits for that event, then carries its headers; a whole reply carries them too.
  struct Decided {
    std::optional<AnsweredBy> answered_by;
    std::vector<std::pair<std::string, std::string>> headers;  // besides answered_by's
  };
  std::function<Decided()> decided;
  int64_t prompt_tokens = 0, completion_tokens = 0;  // of a finished generation (the access log)
  // The client's end of input (FIN) ends the request too, not only a reset: a task's tools have
  // side effects, and a client that timed out and closed sends a FIN, which a half-close also is.
  bool input_end_cancels = false;
};

// A JSON body with its status.
Reply json_reply(int status, const json& body);
// 503 for a store that could not write: full (jobs.max_bytes or the disk) or failing.
Reply store_error_reply(const std::string& what, const Status& status);

// 429 with Retry-After: 1 (a full queue).
Reply busy_reply(const std::string& message);

// What a handler answers, a thrown ParamError becoming its 400 and any other exception a 500
// (the one conversion of every route, whether HTTP or a job called it).
Reply guarded_reply(const std::function<Reply()>& handler);

// A reply decided deep in a handler (a busy adapter, one gone): thrown by answer_now and
// answered as it is by guarded_reply, as bad() is answered with a 400.
struct EarlyReply {
  Reply reply;
};
[[noreturn]] void answer_now(Reply reply);

// {"error": {"message", "type", "param", "code"}} with its status.
Reply error_reply(int status, const std::string& message, const std::string& param = "",
                  const std::string& type = "invalid_request_error");

}  // namespace autoglm
