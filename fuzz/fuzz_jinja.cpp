// A chat template's text -> the parsed template -> a render of a small conversation with
// tools, under tighter step and output limits than the server's (so each run stays short).
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  auto parsed = autoglm::ChatTemplate::parse(source);
  if (!parsed) return 0;
  parsed->set_limits(20000, 1 << 20);
  static const auto messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function":
      {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "{\"temp\": 21}"},
    {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}])");
  static const auto tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name":
    "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type":
    "string"}}, "required": ["city"]}}}])");
  static const auto variables = nlohmann::ordered_json::parse(R"({"bos_token": "<s>", "eos_token": "</s>"})");
  (void)parsed->render(messages, tools, true, variables);
  return 0;
}
