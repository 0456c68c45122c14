// Tool calls in the model's own format, per model family: the family is read off the chat
// template; the parser turns generated text into content and OpenAI tool_calls (streamed:
// content is released only once it cannot be the start of a call, and a call only once it
// is complete, so a half-parsed call never leaks as content); and the grammar that forces a
// call (tool_choice "required" or a named function) with arguments valid for the schema.
//   hermes  (Qwen, Hermes, default): <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
//   llama3  (Llama 3.1+ JSON):       [<|python_tag|>]{"name": ..., "parameters": {...}}  (the whole message)
//   glm4    (GLM-4):                 name\n{...arguments...}                          (the whole message)
//   glm45   (GLM-4.5, 4.6):          <tool_call>name\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>
//   glm47   (GLM-4.7):               <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>
//   qwen3coder (Qwen3-Coder): <tool_call>\n<function=name>\n<parameter=k>\nv\n</parameter>\n</function>\n</tool_call>
//           (glm45/47, qwen3coder: a string argument's value raw, any other as JSON; a call may have none)
//   deepseek_v3_1 (DeepSeek V3.1+):
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>name<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   harmony (gpt-oss):       <|start|>assistant<|channel|>commentary to=functions.name
//   <|constrain|>json<|message|>{...}
//           (chat/harmony.h: the whole reply's format, reasoning included; its markers are control
//           tokens, which the forcing grammar spells through the reply's visible control tokens)
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "autoglm/tool_call.h"
#include "chat/harmony.h"

namespace autoglm {

enum class ToolCallFamily { kHermes, kLlama3, kGlm4, kGlm45, kGlm47, kQwen3Coder, kDeepSeekV31, kHarmony };

ToolCallFamily tool_call_family(const std::string& chat_template);
// "hermes", "llama3", "glm4", "glm45", "glm47", "qwen3coder", "deepseek_v3_1", "harmony".
const char* tool_call_family_name(ToolCallFamily family);
// The family of a name (tool_call_format in the config); none for another name.
std::optional<ToolCallFamily> tool_call_family_from_name(const std::string& name);
// The markers a family's reply must show even where they are control tokens.
std::vector<std::string> tool_call_markers(ToolCallFamily family);

// The function names of OpenAI tool objects, in order (an entry without one is skipped): what
// ToolCallParser takes.
std::vector<std::string> tool_function_names(const nlohmann::ordered_json& tools);

class ToolCallParser {
 public:
  // tool_names: the request's functions (GLM-4's format starts with one of them).
  ToolCallParser(ToolCallFamily family, std::vector<std::string> tool_names, std::string id_prefix);

  struct Output {
    std::string content;          // text that is not a call
    std::vector<ToolCall> calls;  // calls completed by this text
  };
  Output push(const std::string& text);
  // End of generation: whatever is held back. An unfinished call is given back as text,
  // unless generation was cut short (max_tokens): then it, and a marker begun at the end, are
  // dropped, so no raw call markup reaches the client.
  Output finish(bool cut_short = false);

  const std::vector<ToolCall>& calls() const { return calls_; }
  // The request's tools (OpenAI objects): glm45/47 read an argument by its parameter's type (a
  // string raw, anything else as JSON).
  void set_tools(const nlohmann::json& tools);

 private:
  Output parse_hermes(bool final, bool cut_short);
  Output parse_deepseek(bool final, bool cut_short);
  Output from_harmony(HarmonyParser::Output h);
  Output parse_whole_message(bool final, bool cut_short);
  bool add_call(const nlohmann::json& j, Output& out);
  // A glm45/47 or qwen3coder call's text between <tool_call> and </tool_call> as {"name",
  // "arguments"}, or null when it is not one.
  nlohmann::json glm_call(const std::string& body) const;
  nlohmann::json qwen3_coder_call(const std::string& body) const;
  // An argument's value by its parameter's schema: a string raw, anything else as JSON.
  nlohmann::json argument_value(const std::string& function, const std::string& key, const std::string& value) const;

  ToolCallFamily family_;
  std::vector<std::string> names_;
  std::string id_prefix_;
  std::string pending_;                   // text not yet released
  bool in_message_mode_decided_ = false;  // llama3/glm4: whether the message is a call
  bool message_is_call_ = false;
  bool after_call_ = false;                 // hermes: whitespace after a call is dropped
  bool in_calls_ = false;                   // deepseek_v3_1: inside <｜tool▁calls▁begin｜>
  std::unique_ptr<HarmonyParser> harmony_;  // harmony: the whole reply (its reasoning is not content)
  std::vector<ToolCall> calls_;
  nlohmann::json parameters_ = nlohmann::json::object();  // function name -> its parameter schema
};

// A function's parameter schema as its arguments are generated under it: an object schema
// without `additionalProperties` gets `false`, so a model cannot invent argument keys (a
// `properties: {}` or property-less object takes `{}` only). Other schemas are unchanged.
nlohmann::json tool_arguments_schema(const nlohmann::json& parameters);

// The grammar (GBNF) of one call in the family's format to any of `tools` (OpenAI tool
// objects), arguments constrained by each function's parameter schema (tool_arguments_schema);
// `only`: that name.
Result<std::string> tool_call_grammar(ToolCallFamily family, const nlohmann::json& tools, const std::string& only);

}  // namespace autoglm
