// The OpenAI request bodies as typed structs. parse_chat_request and
// parse_completion_request read every field, check it and throw ParamError (a 400 naming
// the field) at the first that is wrong; nothing after them looks at the JSON again.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/engine.h"
#include "autoglm/runtime.h"
#include "server/api/request_params.h"
#include "server/config/config.h"

namespace autoglm {

// What chat and completions share.
struct GenerationParams {
  std::string model;                  // "" when absent
  int64_t n = 1;                      // choices, each with its own seed (seed + index when seeded)
  std::optional<int64_t> max_tokens;  // max_tokens or max_completion_tokens; none: the room left
  std::optional<double> temperature;  // none: the model's default
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> repetition_penalty;
  double min_p = 0, presence_penalty = 0, frequency_penalty = 0;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool speculative = true;          // false: this request drafts nothing (where the server speculates)
  bool skip_special_tokens = true;  // false: special tokens the model writes are shown (vLLM's name)
  OutputConstraint constraint;      // response_format json_object/json_schema, or `grammar` (compiled)
  int32_t priority = 0;
  std::optional<double> timeout_seconds;
  bool stream = false, include_usage = false;
  bool logprobs = false;
  int32_t top_logprobs = -1;     // -1: none
  std::string cache_salt;        // requests share cached prefixes only with the same salt (vLLM's name)
  std::string user;              // the end user (OpenAI's `user`): route arms stick to it
  bool cache = true;             // false: the response cache neither answers nor keeps this request
  bool response_format = false;  // a response_format was given (route rules look at it)
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> bias in [-100, 100]
};

struct ChatRequest {
  GenerationParams params;
  json messages;  // content as text, tool_calls' arguments as objects (what route rules read)
  // The same for the runtime: messages, tools (none under tool_choice none), tool_choice,
  // parallel_tool_calls and template kwargs.
  Conversation conversation;
  bool tools_offered = false;  // a non-empty `tools` (offered even under tool_choice none)
};

struct CompletionRequest {
  GenerationParams params;
  std::string prompt;
};

ChatRequest parse_chat_request(const json& body, const ServerConfig& config);
// This server's chat extensions (grammar, reasoning_format, chat_template_kwargs,
// thinking_budget_tokens, seed, priority, cache_salt), copied as they are from another API's body
// (Responses, Messages) into the chat body it becomes.
void copy_chat_extensions(const json& from, json& chat);
// Message content: a string, or an array of text parts, as one text; with image parts
// (image_url, input_image), the parts normalised to {"type": "text"} and {"type": "image_url",
// "image_url": {"url"}} for the runtime, which reads the images or refuses them by name
// (throws ParamError naming `param` when it is neither).
json message_content(const json& content, const std::string& param);
// {"type": "image_url", "image_url": {"url": url}}: how an image reaches the runtime.
json image_url_part(const std::string& url);
CompletionRequest parse_completion_request(const json& body, const ServerConfig& config);

enum class GenerationKind { kChat, kCompletion };

// A chat or completions request as the generation handlers take it: its body parsed once at
// the edge (an HTTP request, an async job, a batch line), with what routing and the response
// cache read besides: the caller's key and headers.
struct GenerationCall {
  GenerationKind kind = GenerationKind::kChat;
  ChatRequest chat;              // of kChat
  CompletionRequest completion;  // of kCompletion
  std::string api_key;
  bool no_cache = false;                                     // Cache-Control: no-cache or no-store
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-case: route rules and arms
  bool is_chat() const { return kind == GenerationKind::kChat; }
  const GenerationParams& params() const { return is_chat() ? chat.params : completion.params; }
  GenerationParams& params() { return is_chat() ? chat.params : completion.params; }
};

// Throws ParamError (a 400 naming the field).
GenerationCall parse_generation_call(GenerationKind kind, const json& body, const ServerConfig& config);

// The runtime's request: sampling the call leaves unset comes from the model's
// generation_config.json; no max_tokens: as many as the context leaves room for.
Request runtime_request(const GenerationCall& call, const SamplingDefaults& defaults);

}  // namespace autoglm
