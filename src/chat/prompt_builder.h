// The one recipe from a conversation to the tokens the model sees, shared by the OpenAI
// routes and the task pipeline: the chat template renders the messages and tools with the
// special-token variables and the request's kwargs; the text is encoded with BOS added
// unless the template already wrote it; and a forced tool call (tool_choice "required" or a
// named function) becomes the grammar, in the template's tool-call family, that constrains
// decoding.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "autoglm/tool_call.h"
#include "chat/chat_template.h"
#include "chat/marker_guard.h"
#include "chat/tool_calls.h"
#include "sample/grammar.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {

// The most tokens a prompt may have, and what an error says of that bound ("over the limit of
// 120 (limit prompt_tokens)"). A prompt known to pass it is refused before it is all encoded.
struct TokenCap {
  size_t tokens = SIZE_MAX;
  std::string over;
};

struct PromptRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // tool_calls' arguments as objects
  nlohmann::ordered_json tools;                                       // OpenAI tool objects, or null
  ToolChoice tool_choice = ToolChoice::kNone;
  std::string tool_name;                                                      // for kNamed
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // enable_thinking...
  bool add_generation_prompt = true;
  TokenCap cap;
};

struct Prompt {
  std::string text;
  std::vector<int32_t> ids;
  std::shared_ptr<const Grammar> forced_call;  // set for kRequired and kNamed
};

class PromptBuilder {
 public:
  // Both must outlive the builder; the tool-call family is read off the template once.
  // `family`: the tool-call format; none: read off the template.
  PromptBuilder(const ChatTemplate& chat_template, const Tokenizer& tokenizer, GrammarLimits grammar_limits = {},
                std::optional<ToolCallFamily> family = std::nullopt);

  // On error, *error_param (when given) names the request field at fault: "messages" for
  // the template, "tools" or "tool_choice" for the forced call.
  Result<Prompt> build(const PromptRequest& request, std::string* error_param = nullptr) const;
  // Plain text (completions): BOS added unless the text starts with it; special tokens in
  // the text are not parsed.
  std::vector<int32_t> encode_text(const std::string& text) const;
  // The same, refused (out_of_range, naming the cap) once the text is known to pass `cap`.
  Result<std::vector<int32_t>> encode_text(const std::string& text, const TokenCap& cap) const;

  ToolCallFamily family() const { return family_; }
  // {"bos_token", "eos_token"}: the variables every render gets.
  nlohmann::ordered_json special_token_variables() const;

 private:
  std::vector<int32_t> encode(const std::string& text, bool parse_special,
                              const std::vector<Tokenizer::ByteRange>& plain = {}, size_t max_tokens = SIZE_MAX) const;
  Result<std::vector<int32_t>> encode_within(const std::string& text, bool parse_special,
                                             const std::vector<Tokenizer::ByteRange>& plain, const TokenCap& cap) const;

  const ChatTemplate& template_;
  const Tokenizer& tokenizer_;
  ToolCallFamily family_;
  GrammarLimits grammar_limits_;  // of forced tool calls
  ControlMarkers markers_;        // kept from becoming control tokens in untrusted text
};

}  // namespace autoglm
