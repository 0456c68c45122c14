// Model output -> content and tool calls, per family (chat/tool_calls.h, chat/harmony.h): the
// first byte picks the family and where the rest is cut in two; fed whole or in two pieces, the
// content and the calls (names, arguments) must be the same, and nothing may crash.
#include <cstdlib>

#include "chat/harmony.h"
#include "chat/tool_calls.h"

namespace {

constexpr autoglm::ToolCallFamily kFamilies[] = {
    autoglm::ToolCallFamily::kHermes,      autoglm::ToolCallFamily::kLlama3, autoglm::ToolCallFamily::kGlm4,
    autoglm::ToolCallFamily::kGlm45,       autoglm::ToolCallFamily::kGlm47,  autoglm::ToolCallFamily::kQwen3Coder,
    autoglm::ToolCallFamily::kDeepSeekV31, autoglm::ToolCallFamily::kHarmony};

std::string run(autoglm::ToolCallFamily family, const std::string& text, size_t cut, bool cut_short) {
  autoglm::ToolCallParser parser(family, {"get_weather", "now"}, "c");
  parser.set_tools(nlohmann::json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
          "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}])"));
  std::string out;
  for (const std::string& piece : {text.substr(0, cut), text.substr(cut)}) out += parser.push(piece).content;
  out += parser.finish(cut_short).content;
  out += '\x01';
  for (const autoglm::ToolCall& c : parser.calls()) out += c.name + '\x02' + c.arguments + '\x03';
  return out;
}

std::string run_harmony(const std::string& text, size_t cut) {
  autoglm::HarmonyParser parser;
  std::string reasoning, content;
  for (const std::string& piece : {text.substr(0, cut), text.substr(cut)}) {
    auto o = parser.push(piece);
    reasoning += o.reasoning;
    content += o.content;
  }
  auto rest = parser.finish();
  return reasoning + rest.reasoning + '\x01' + content + rest.content + '\x01' + std::to_string(parser.calls().size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const autoglm::ToolCallFamily family = kFamilies[data[0] % 8];
  const bool cut_short = data[0] & 8;
  const std::string text(reinterpret_cast<const char*>(data + 2), size - 2);
  const size_t cut = text.empty() ? 0 : data[1] % (text.size() + 1);
  if (run(family, text, text.size(), cut_short) != run(family, text, cut, cut_short)) std::abort();
  if (run_harmony(text, text.size()) != run_harmony(text, cut)) std::abort();
  return 0;
}
