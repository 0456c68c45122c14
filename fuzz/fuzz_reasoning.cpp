// Model output -> reasoning and answer (chat/reasoning_split.h): the first byte picks where
// the rest is cut in two and whether the prompt opened the thinking; fed whole or in two
// pieces, the split must be the same, and no byte may be lost but whitespace after </think>.
#include <cstdlib>

#include "chat/reasoning_split.h"

namespace {

autoglm::ReasoningSplit::Output run(const std::string& text, size_t cut, bool thinking) {
  autoglm::ReasoningSplit split(thinking);
  autoglm::ReasoningSplit::Output out;
  for (const std::string& piece : {text.substr(0, cut), text.substr(cut)}) {
    auto o = split.push(piece);
    out.reasoning += o.reasoning;
    out.content += o.content;
  }
  auto rest = split.finish();
  out.reasoning += rest.reasoning;
  out.content += rest.content;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool thinking = data[0] & 1;
  const size_t cut = text.empty() ? 0 : (data[0] >> 1) % (text.size() + 1);
  const auto whole = run(text, text.size(), thinking);
  const auto pieces = run(text, cut, thinking);
  if (whole.reasoning != pieces.reasoning || whole.content != pieces.content) std::abort();
  if (whole.reasoning.size() + whole.content.size() > text.size()) std::abort();
  return 0;
}
