// JSON Schema text -> GBNF -> a grammar under the default limits -> a walk over a few
// characters. Errors are values; nothing may crash, hang or grow without bound. Patterns,
// formats and bounds spend one AutomatonBudget per schema (sample/automaton.h), so an input
// costs at most its max_steps of automaton work (tens of milliseconds, more under ASan);
// corpus seeds 7-9 reach it with nested counted repetition, lookaheads and large classes.
#include <nlohmann/json.hpp>

#include "core/json_brackets.h"
#include "sample/grammar.h"
#include "sample/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (autoglm::json_depth(text) > autoglm::RequestLimits{}.json_depth) return 0;  // the server refuses it first
  const auto schema = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  auto gbnf = autoglm::json_schema_to_gbnf(schema);
  if (!gbnf) return 0;
  auto grammar = autoglm::Grammar::parse(*gbnf);
  if (!grammar) return 0;
  autoglm::GrammarState state(*grammar);
  for (const char* piece : {"{", "\"", "a", "\"", ":", "1", "}"}) {
    if (state.dead()) break;
    state = state.advance_bytes(piece);
    state.distance_to_accept();
  }
  return 0;
}
