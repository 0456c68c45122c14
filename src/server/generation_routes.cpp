// The generation path of the API: a chat, completion or Responses request resolved to a
// model (directly, or through a route's rules, split or cascade), rendered, answered from
// the response cache or submitted to the model's engine, and written as the reply.
#include <algorithm>
#include <ctime>
#include <random>

#include "core/random_id.h"
#include "server/api/openai_request.h"
#include "server/generation_routes.h"
#include "server/routing/cascade_stream.h"

namespace autoglm {
namespace {

// What a route's rules and arms look at (the prompt's length is added once it is rendered).
RouteFacts route_facts(const GenerationCall& call) {
  RouteFacts f;
  if (call.is_chat()) {
    for (const json& m : call.chat.messages)
      if (m.value("role", "") == "user" && m["content"].is_string()) f.last_user_message = m["content"];
  } else {
    f.last_user_message = call.completion.prompt;
  }
  f.has_tools = call.is_chat() && call.chat.tools_offered;
  f.has_response_format = call.params().response_format;
  f.headers = call.headers;
  f.api_key = call.api_key;
  f.user = call.params().user;
  return f;
}

void add_route_headers(Reply& r, const std::string& model, const std::string& route, const std::string& reason) {
  r.answered_by = {model, route, reason};
  for (auto& h : answered_by_headers(r.answered_by)) r.headers.push_back(std::move(h));
}

double uniform_draw() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0, 1)(rng);
}

}  // namespace

GenerationRoutes::GenerationRoutes(const ServerConfig& config, ServerMetrics& metrics, ModelCatalog& catalog,
                                   InFlight& in_flight)
    : config_(config), metrics_(metrics), catalog_(catalog), in_flight_(in_flight), feedback_(config.feedback_log) {}

Status GenerationRoutes::start() {
  if (config_.response_cache.enabled) {
    AUTOGLM_ASSIGN_OR_RETURN(response_cache_, ResponseCache::create(config_.response_cache));
  }
  return Status::ok();
}

void GenerationRoutes::bind(HandlerTable& table) {
  table.bind(Endpoint::kChatCompletions,
             [this](const HttpRequest& req, const RouteLookup&) { return generate(req, GenerationKind::kChat); });
  table.bind(Endpoint::kCompletions,
             [this](const HttpRequest& req, const RouteLookup&) { return generate(req, GenerationKind::kCompletion); });
  table.bind(Endpoint::kCreateResponse,
             [this](const HttpRequest& req, const RouteLookup&) { return create_response(req); });
  table.bind(Endpoint::kCreateMessage,
             [this](const HttpRequest& req, const RouteLookup&) { return create_message(req); });
  table.bind(Endpoint::kCountMessageTokens,
             [this](const HttpRequest& req, const RouteLookup&) { return count_message_tokens(req); });
  const RouteHandler stored = [this](const HttpRequest& req, const RouteLookup& found) {
    return stored_response(req.method, std::string(found.params["id"]), api_key_of(req));
  };
  table.bind(Endpoint::kGetResponse, stored);
  table.bind(Endpoint::kDeleteResponse, stored);
  table.bind(Endpoint::kFeedback, [this](const HttpRequest& req, const RouteLookup&) { return feedback(req.body); });
}

void GenerationRoutes::check(const GenerationCall& call, const Target& target) {
  prepare_generation(call, *target.model, &target);
}

std::string GenerationRoutes::cache_metrics() const {
  return response_cache_ ? response_cache_->render_metrics() : "";
}

// The request path: typed request -> prompt -> engine request -> stream handle whose
// events the response writer turns into the reply.
// The prefix-cache salt of a request: its API key's unless the cache is shared across keys,
// and the request's own cache_salt.
std::string GenerationRoutes::cache_salt(const std::string& api_key, const std::string& request_salt) const {
  std::string salt = config_.prefix_cache_per_key && !config_.api_keys.empty() ? api_key : "";
  if (request_salt.empty()) return salt;
  salt += '\0';  // keys hold no NUL: no key and salt pair can spell another's
  return salt + request_salt;
}

// POST /v1/responses: the chat pipeline with the Responses writer; the finished response and
// its conversation are stored (store: true) for GET and for previous_response_id, whose
// conversation comes first in the prompt (and so finds its KV in the prefix cache).
Reply GenerationRoutes::create_response(const HttpRequest& req) {
  const json j = parse_body(req.body, config_.runtime.limits);
  const std::string api_key = api_key_of(req);
  Target target;
  if (auto other = catalog_.resolve(j, target, true)) return *other;
  json previous = json::array();
  if (j.contains("previous_response_id") && !j["previous_response_id"].is_null()) {
    if (!j["previous_response_id"].is_string()) bad("previous_response_id", "'previous_response_id' must be a string");
    const std::string id = j["previous_response_id"];
    auto entry = responses_.get(id, api_key);
    if (!entry) return error_reply(404, "no stored response '" + id + "'", "previous_response_id");
    previous = entry->messages;
  }
  if (j.contains("store") && !j["store"].is_boolean()) bad("store", "'store' must be a boolean");
  const bool store = j.value("store", true);
  json conversation;
  try {
    GenerationCall call =
        parse_generation_call(GenerationKind::kChat, responses_to_chat(j, previous, conversation), config_);
    call.api_key = api_key;
    call.headers = req.headers;
    RouteChoice choice;
    PreparedGeneration p = prepare_routed(target, call, choice);
    const std::string route_name = target.route ? target.route->name : "";
    const std::string id = random_id("resp_");
    RequestMetrics& series = metrics_.requests(p.model->name, route_name);
    feedback_.remember(id, &series, p.model->name, route_name);
    auto writer = std::make_shared<ResponsesWriter>(j, id, p.model->name, p.shape, series);
    Reply r = submit_generation(std::move(p),
                                [this, writer, conversation, store, api_key, id](const StreamEvent& ev, size_t index) {
                                  ReplyChunk chunk = writer->consume(ev, index);
                                  if (chunk.complete && store) {
                                    json all = conversation;
                                    for (const json& m : writer->output_messages()) all.push_back(m);
                                    responses_.put(id, {writer->response(), all, api_key});
                                  }
                                  return chunk;
                                });
    add_route_headers(r, choice.model, route_name, choice.reason);
    return r;
  } catch (const ParamError& e) {
    bad(responses_param(e.param), e.message);
  }
}

GenerationRoutes::PreparedGeneration GenerationRoutes::prepare_routed(const Target& target, const GenerationCall& call,
                                                                      RouteChoice& choice) {
  if (!target.route) {
    choice = {target.lora.empty() ? target.model->name : target.lora, "", ""};
    return prepare_generation(call, *target.model, &target);
  }
  if (target.route->kind == RouteKind::kCascade)
    answer_now(error_reply(
        400, "'" + target.route->name + "' is a cascade route, which serves chat and completions only", "model"));
  std::optional<PreparedGeneration> prepared;
  choice = choose(*target.route, call, prepared);
  return prepared ? std::move(*prepared) : prepare_generation(call, catalog_.model_named(choice.model));
}

// POST /v1/messages: the chat pipeline with the Anthropic writer (tool calls are named toolu_...).
Reply GenerationRoutes::create_message(const HttpRequest& req) {
  try {
    GenerationCall call = parse_generation_call(
        GenerationKind::kChat, anthropic_to_chat(parse_body(req.body, config_.runtime.limits)), config_);
    call.api_key = api_key_of(req);
    call.headers = req.headers;
    Target target;
    if (auto other = catalog_.resolve(call.params().model, target, true)) return *other;
    RouteChoice choice;
    PreparedGeneration p = prepare_routed(target, call, choice);
    if (!p.shape.call_id_prefix.empty()) p.shape.call_id_prefix = "toolu_" + p.shape.call_id_prefix.substr(5);
    const std::string route_name = target.route ? target.route->name : "";
    auto writer = std::make_shared<AnthropicWriter>(p.shape, metrics_.requests(p.shape.model, route_name));
    Reply r = submit_generation(std::move(p),
                                [writer](const StreamEvent& ev, size_t index) { return writer->consume(ev, index); });
    add_route_headers(r, choice.model, route_name, choice.reason);
    return r;
  } catch (const ParamError& e) {
    bad(anthropic_param(e.param), e.message);
  }
}

// POST /v1/messages/count_tokens: the prompt a Messages body renders to, counted (with the
// model a route would try first; nothing is counted as routed).
Reply GenerationRoutes::count_message_tokens(const HttpRequest& req) {
  try {
    const GenerationCall call = parse_generation_call(
        GenerationKind::kChat, anthropic_to_chat(parse_body(req.body, config_.runtime.limits), true), config_);
    Target target;
    if (auto other = catalog_.resolve(call.params().model, target, true)) return *other;
    const PreparedGeneration p = target.route
                                     ? prepare_generation(call, catalog_.model_named(target.route->models().front()))
                                     : prepare_generation(call, *target.model, &target);
    return json_reply(200, json{{"input_tokens", p.prepared->prompt().size()}});
  } catch (const ParamError& e) {
    bad(anthropic_param(e.param), e.message);
  }
}

RouteChoice GenerationRoutes::choose(const Route& route, const GenerationCall& call,
                                     std::optional<PreparedGeneration>& prepared) {
  RouteFacts facts = route_facts(call);
  RouteChoice choice;
  if (route.kind == RouteKind::kRules) {
    prepared = prepare_generation(call, catalog_.model_named(route.default_model));
    facts.prompt_tokens = int64_t(prepared->prepared->prompt().size());
    choice = choose_by_rules(route, facts);
    if (choice.model != route.default_model) prepared.reset();
  } else {
    choice = choose_arm(route, facts, uniform_draw());
  }
  metrics_.count_route(route.name, choice.model, choice.decision);
  return choice;
}

// A chat or completions request from HTTP: its body parsed once, then as any other call.
Reply GenerationRoutes::generate(const HttpRequest& req, GenerationKind kind) {
  GenerationCall call = parse_generation_call(kind, parse_body(req.body, config_.runtime.limits), config_);
  call.api_key = api_key_of(req);
  call.no_cache = req.cache_control.find("no-cache") != std::string::npos ||
                  req.cache_control.find("no-store") != std::string::npos;
  call.headers = req.headers;
  return generate(call);
}

Reply GenerationRoutes::generate(const GenerationCall& call) {
  Target target;
  if (auto other = catalog_.resolve(call.params().model, target, true)) return *other;
  const bool use_cache = response_cache_ && !call.no_cache && call.params().cache;
  if (!target.route) {
    Reply r = generate_on(prepare_generation(call, *target.model, &target), "", use_cache);
    add_route_headers(r, target.lora.empty() ? target.model->name : target.lora, "", "");
    return r;
  }
  const Route& route = *target.route;
  if (route.kind == RouteKind::kCascade) return cascade(route, call);
  std::optional<PreparedGeneration> prepared;
  const RouteChoice choice = choose(route, call, prepared);
  Reply r = generate_on(prepared ? std::move(*prepared) : prepare_generation(call, catalog_.model_named(choice.model)),
                        route.name, use_cache);
  add_route_headers(r, choice.model, route.name, choice.reason);
  return r;
}

Reply GenerationRoutes::generate_on(PreparedGeneration p, const std::string& route, bool use_cache) {
  // An adapter's requests are counted (and cached) as its own: the name it was asked by.
  const std::string& served = p.shape.model;
  RequestMetrics& series = metrics_.requests(served, route);
  feedback_.remember(p.shape.id, &series, served, route);
  auto writer = std::make_shared<ResponseWriter>(p.shape, *p.hold.runtime, series);
  // The writer reads the model's tokenizer: the model stays loaded while the reply goes on.
  auto consume = [writer, hold = p.hold.token](const StreamEvent& ev, size_t choice) {
    return writer->consume(ev, choice);
  };
  const std::optional<std::string> key =
      use_cache ? response_cache_key(served, p.shape.chat, *p.prepared, p.shape.choices) : std::nullopt;
  if (!key) return submit_generation(std::move(p), consume);
  if (auto hit = response_cache_->find(*key)) {
    Reply r = replay(*hit, p, consume);
    r.headers.emplace_back("X-AutoGLM-Cache", "hit");
    return r;
  }
  auto recorder = std::make_shared<GenerationRecorder>(size_t(p.params.n));
  Reply r = submit_generation(
      std::move(p), [consume, recorder, cache = response_cache_, key = *key](const StreamEvent& ev, size_t choice) {
        recorder->record(ev, choice);
        ReplyChunk chunk = consume(ev, choice);
        if (chunk.complete && recorder->whole()) cache->insert(key, recorder->take());
        return chunk;
      });
  r.headers.emplace_back("X-AutoGLM-Cache", "miss");
  return r;
}

// A cascade: the light model's first tokens decide whether it answers or the heavy one does
// (see CascadeStream); both prompts are rendered up front, each with its model's template.
Reply GenerationRoutes::cascade(const Route& route, const GenerationCall& call) {
  PreparedGeneration light = describe_generation(call, catalog_.model_named(route.cascade.light));
  PreparedGeneration heavy = prepare_generation(call, catalog_.model_named(route.cascade.heavy));
  if (light.params.n > 1) bad("n", "a cascade route answers with one choice ('n' must be 1)");
  heavy.shape.id = light.shape.id;  // one response, whichever model gives it
  const int32_t wanted_logprobs = light.request.top_logprobs;
  light.request.top_logprobs = std::max(1, wanted_logprobs);  // the confidence is the top-1 probability
  make_ready(light);
  RequestMetrics& light_series = metrics_.requests(light.model->name, route.name);
  RequestMetrics& heavy_series = metrics_.requests(heavy.model->name, route.name);
  auto light_writer = std::make_shared<ResponseWriter>(light.shape, *light.hold.runtime, light_series);
  auto heavy_writer = std::make_shared<ResponseWriter>(heavy.shape, *heavy.hold.runtime, heavy_series);
  auto light_handle = light.hold.runtime->submit(*light.prepared);
  if (!light_handle) {
    if (light_handle.status().code() == StatusCode::kResourceExhausted)
      return busy_reply(light_handle.status().message());
    bad(light.prompt_param, light_handle.status().message());
  }
  auto decision = std::make_shared<std::optional<CascadeDecision>>();  // set on an engine thread, read after
  auto tracked = std::make_shared<std::vector<std::shared_ptr<void>>>();
  tracked->push_back(in_flight_.track(*light_handle));
  tracked->push_back(light.hold.token);
  tracked->push_back(heavy.hold.token);
  Runtime* heavy_runtime = heavy.hold.runtime;
  auto submit_heavy = [this, heavy_runtime, request = *heavy.prepared, tracked]() {
    auto handle = heavy_runtime->submit(request);
    if (handle) tracked->push_back(in_flight_.track(*handle));
    return handle;
  };
  const std::string light_name = light.model->name, heavy_name = heavy.model->name, id = light.shape.id;
  auto on_decided = [this, decision, route_name = route.name, light_name, heavy_name, id, &light_series,
                     &heavy_series](const CascadeDecision& d) {
    *decision = d;
    const std::string& answered = d.escalated ? heavy_name : light_name;
    metrics_.count_route(route_name, answered, d.escalated ? "escalated" : "kept");
    feedback_.remember(id, d.escalated ? &heavy_series : &light_series, answered, route_name);
  };
  auto stream = CascadeStream::start(*light_handle, route.cascade, wanted_logprobs, submit_heavy, on_decided);
  tracked->push_back(in_flight_.track(stream->output()));
  Reply r;
  r.stream = std::make_shared<ChoiceStreams>(stream->output(), 1, nullptr);
  r.streaming = light.params.stream;
  if (r.streaming) r.content_type = "text/event-stream";
  r.consume = [decision, light_writer, heavy_writer, tracked](const StreamEvent& ev, size_t index) {
    return (*decision && (*decision)->escalated ? heavy_writer : light_writer)->consume(ev, index);
  };
  r.decided = [decision, light_name, heavy_name, route_name = route.name]() {
    const bool escalated = *decision && (*decision)->escalated;
    Reply::Decided d;
    d.answered_by = AnsweredBy{escalated ? heavy_name : light_name, route_name,
                               *decision ? "cascade: " + (*decision)->reason : "cascade"};
    return d;
  };
  return r;
}

Reply GenerationRoutes::replay(const CachedGeneration& cached, const PreparedGeneration& p, Consume consume) {
  std::vector<std::shared_ptr<StreamHandle>> handles;
  for (const std::vector<StreamEvent>& events : cached.choices) handles.push_back(StreamHandle::recorded(events));
  Reply r;
  r.stream = std::make_shared<ChoiceStreams>(
      handles[0], handles.size(),
      [handles](size_t index) -> Result<std::shared_ptr<StreamHandle>> { return handles[index]; });
  r.streaming = p.params.stream;
  if (r.streaming) r.content_type = "text/event-stream";
  r.consume = std::move(consume);
  return r;
}

// A typed chat or completions request for a model: the runtime's request and the response's
// shape (throws ParamError naming the field).
GenerationRoutes::PreparedGeneration GenerationRoutes::describe_generation(const GenerationCall& call, ModelService& m,
                                                                           const Target* lora) {
  PreparedGeneration p;
  p.model = &m;
  p.hold = catalog_.hold(m);
  p.params = call.params();
  p.prompt_param = call.is_chat() ? "messages" : "prompt";
  p.request = runtime_request(call, m.info.sampling_defaults);
  p.request.cache_salt = cache_salt(call.api_key, p.params.cache_salt);
  ResponseShape& shape = p.shape;
  shape.chat = call.is_chat();
  shape.stream = p.params.stream;
  shape.include_usage = p.params.include_usage;
  shape.logprobs = p.params.logprobs;
  const std::string number = std::to_string(next_id_++);
  shape.id = std::string(shape.chat ? "chatcmpl-" : "cmpl-") + number;
  shape.call_id_prefix = "call_" + number + "_";  // kept when the reply is read for tool calls
  shape.model = m.name;
  shape.created = int64_t(std::time(nullptr));
  shape.choices = size_t(p.params.n);
  if (lora && !lora->lora.empty()) {
    p.request.lora = lora->lora;
    shape.model = lora->lora;  // counted and cached as the name it was asked by
  }
  return p;
}

// The runtime renders the prompt, compiles what is left and checks the limits: its errors
// name the field (a 400), an adapter busy or gone is a 429 or a 404 naming the model.
void GenerationRoutes::make_ready(PreparedGeneration& p) {
  auto prepared = p.hold.runtime->prepare(p.request);
  if (!prepared) {
    const Status& st = prepared.status();
    if (st.field() == "lora") {
      if (st.code() == StatusCode::kResourceExhausted) answer_now(busy_reply(st.message()));
      answer_now(error_reply(404, st.message(), "model"));
    }
    bad(st.field().empty() ? p.prompt_param : st.field(), st.message());
  }
  p.prepared = std::move(prepared).value();
  if (!p.prepared->reads_tool_calls()) p.shape.call_id_prefix.clear();
}

GenerationRoutes::PreparedGeneration GenerationRoutes::prepare_generation(const GenerationCall& call, ModelService& m,
                                                                          const Target* lora) {
  PreparedGeneration p = describe_generation(call, m, lora);
  make_ready(p);
  return p;
}

// Submits the prepared request (n choices: see ChoiceStreams); `consume` turns its events
// into the reply's bytes.
Reply GenerationRoutes::submit_generation(PreparedGeneration p, Consume consume) {
  auto in_flight = std::make_shared<std::vector<std::shared_ptr<void>>>();
  Runtime* runtime = p.hold.runtime;
  ChoiceStreams::Submit submit_choice = [this, runtime, prepared = *p.prepared,
                                         in_flight](size_t index) -> Result<std::shared_ptr<StreamHandle>> {
    auto handle = runtime->submit(prepared, int32_t(index));
    if (handle) in_flight->push_back(in_flight_.track(*handle));
    return handle;
  };
  auto handle = runtime->submit(*p.prepared);
  if (!handle) {
    if (handle.status().code() == StatusCode::kResourceExhausted) return busy_reply(handle.status().message());
    bad(p.prompt_param, handle.status().message());
  }
  in_flight->push_back(in_flight_.track(*handle));
  in_flight->push_back(p.hold.token);
  Reply r;
  r.stream = std::make_shared<ChoiceStreams>(*handle, size_t(p.params.n), std::move(submit_choice));
  r.streaming = p.params.stream;
  if (r.streaming) r.content_type = "text/event-stream";
  r.consume = [consume = std::move(consume), in_flight](const StreamEvent& ev, size_t choice) {
    return consume(ev, choice);
  };
  return r;
}

// POST /v1/feedback {"response_id", "thumbs"?, "score"?, "comment"?}
Reply GenerationRoutes::feedback(const std::string& body) {
  const json j = parse_body(body, config_.runtime.limits);
  if (!feedback_.record(j))
    return error_reply(404, "no response '" + j["response_id"].get<std::string>() + "' to give feedback on",
                       "response_id");
  Reply r;
  r.body = json{{"object", "feedback"}, {"recorded", true}}.dump();
  return r;
}

// GET or DELETE /v1/responses/{id}: only the key that created it sees it.
Reply GenerationRoutes::stored_response(const std::string& method, const std::string& id, const std::string& api_key) {
  Reply r;
  if (method == "DELETE") {
    if (!responses_.erase(id, api_key)) return error_reply(404, "no stored response '" + id + "'");
    r.body = json{{"id", id}, {"object", "response"}, {"deleted", true}}.dump();
    return r;
  }
  auto entry = responses_.get(id, api_key);
  if (!entry) return error_reply(404, "no stored response '" + id + "'");
  r.body = entry->response.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

}  // namespace autoglm
