// The generation handlers: chat completions, completions and the Responses API (with its
// stored responses), feedback on a response; a request resolved to a model (directly, or
// through a route's rules, split or cascade), made ready by its runtime, answered from the
// response cache or submitted, and rendered as the reply.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "server/api/anthropic_messages.h"
#include "server/api/anthropic_request.h"
#include "server/api/choice_streams.h"
#include "server/api/feedback.h"
#include "server/api/openai_request.h"
#include "server/api/response_writer.h"
#include "server/api/responses_api.h"
#include "server/catalog.h"
#include "server/handler_table.h"
#include "server/in_flight.h"
#include "server/metrics/metrics.h"
#include "server/routing/response_cache.h"

namespace autoglm {

class GenerationRoutes {
 public:
  GenerationRoutes(const ServerConfig& config, ServerMetrics& metrics, ModelCatalog& catalog, InFlight& in_flight);
  // Opens the response cache (its file, when configured); errors name it.
  Status start();
  void bind(HandlerTable& table);

  // A typed chat or completions call, from HTTP or a job (never a made-up HTTP request).
  Reply generate(const GenerationCall& call);
  // Checks a call as far as it can be without running it (an async job at submission): throws
  // ParamError naming the field, or an EarlyReply.
  void check(const GenerationCall& call, const Target& target);
  // The response cache's Prometheus text ("" when it is off).
  std::string cache_metrics() const;

 private:
  struct PreparedGeneration {
    ModelService* model = nullptr;
    ModelHold hold;                           // the model stays loaded until the reply is done
    Request request;                          // for the model's runtime
    std::optional<PreparedRequest> prepared;  // made ready by it (the prompt rendered)
    ResponseShape shape;
    GenerationParams params;
    std::string prompt_param;  // "messages" or "prompt": what errors about the prompt name
  };
  using Consume = std::function<ReplyChunk(const StreamEvent&, size_t)>;

  Reply generate(const HttpRequest& request, GenerationKind kind);
  Reply create_response(const HttpRequest& request);
  Reply create_message(const HttpRequest& request);
  Reply count_message_tokens(const HttpRequest& request);
  // A chat call made ready for the model its target names, or the one its route chooses
  // (`choice` says which, and why); a cascade route is refused (it serves chat and completions).
  PreparedGeneration prepare_routed(const Target& target, const GenerationCall& call, RouteChoice& choice);
  Reply stored_response(const std::string& method, const std::string& id, const std::string& api_key);
  Reply feedback(const std::string& body);
  // The runtime request and the reply's shape for a model (`lora`: the adapter the request
  // names, when it names one); prepare_generation also makes it ready (throws ParamError
  // naming the field, or an EarlyReply).
  PreparedGeneration describe_generation(const GenerationCall& call, ModelService& model, const Target* lora = nullptr);
  void make_ready(PreparedGeneration& p);
  PreparedGeneration prepare_generation(const GenerationCall& call, ModelService& model, const Target* lora = nullptr);
  // One model answers (the response cache first, when `use_cache`); `route` labels its metrics.
  Reply generate_on(PreparedGeneration p, const std::string& route, bool use_cache);
  Reply cascade(const Route& route, const GenerationCall& call);
  // A rules or split route's model for this request (rules render the prompt with the
  // route's default model first, kept in `prepared` for when that model answers).
  RouteChoice choose(const Route& route, const GenerationCall& call, std::optional<PreparedGeneration>& prepared);
  Reply submit_generation(PreparedGeneration prepared, Consume consume);
  // A cached generation's events, through `consume` as if the engine sent them.
  Reply replay(const CachedGeneration& cached, const PreparedGeneration& prepared, Consume consume);
  std::string cache_salt(const std::string& api_key, const std::string& request_salt) const;

  const ServerConfig& config_;
  ServerMetrics& metrics_;
  ModelCatalog& catalog_;
  InFlight& in_flight_;
  FeedbackBook feedback_;
  ResponseStore responses_;                        // /v1/responses with store: true
  std::shared_ptr<ResponseCache> response_cache_;  // null when response_cache.enabled is false
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace autoglm
