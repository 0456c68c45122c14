#include "sample/automaton_gbnf.h"

#include "sample/gbnf_literal.h"

namespace autoglm {
namespace {

std::string hex_escape(uint32_t c) {
  static const char* digits = "0123456789abcdef";
  const int width = c < 0x100 ? 2 : c < 0x10000 ? 4 : 8;
  std::string out = width == 2 ? "\\x" : width == 4 ? "\\u" : "\\U";
  for (int k = width - 1; k >= 0; --k) out += digits[(c >> (4 * k)) & 15];
  return out;
}

std::string class_char(uint32_t c) {
  const bool plain = c < 128 && std::isalnum(int(c));
  return plain ? std::string(1, char(c)) : hex_escape(c);
}

std::string class_expr(const CodeSet& set) {
  std::string out = "[";
  for (const CharRange& r : set) out += r.lo == r.hi ? class_char(r.lo) : class_char(r.lo) + "-" + class_char(r.hi);
  return out + "]";
}

// The JSON string encodings of the code points in `set`, as GBNF alternatives.
std::vector<std::string> json_encodings(const CodeSet& set) {
  std::vector<std::string> out;
  const CodeSet plain = code_set_minus(set, {{0, 0x1f}, {'"', '"'}, {'\\', '\\'}});
  if (!plain.empty()) out.push_back(class_expr(plain));
  for (uint32_t c : {uint32_t('"'), uint32_t('\\')})
    if (code_set_contains(set, c)) out.push_back(gbnf_literal(std::string("\\") + char(c)));
  static const std::map<uint32_t, char> short_escapes = {
      {'\b', 'b'}, {'\f', 'f'}, {'\n', 'n'}, {'\r', 'r'}, {'\t', 't'}};
  for (uint32_t c = 0; c < 0x20; ++c) {
    if (!code_set_contains(set, c)) continue;
    if (auto it = short_escapes.find(c); it != short_escapes.end())
      out.push_back(gbnf_literal(std::string("\\") + it->second));
    else
      out.push_back(gbnf_literal("\\u00" + std::string(c < 0x10 ? "0" : "1") + "0123456789abcdef"[c & 15]));
  }
  return out;
}

}  // namespace

std::string add_dfa_rules(const Dfa& dfa, const std::string& name, TextForm form,
                          std::map<std::string, std::string>& rules) {
  auto rule_of = [&](size_t s) { return name + "-" + std::to_string(s); };
  for (size_t s = 0; s < dfa.states.size(); ++s) {
    std::map<int32_t, CodeSet> by_target;
    for (const Dfa::Edge& e : dfa.states[s].edges) by_target[e.target].push_back(e.range);
    std::string body;
    for (const auto& [target, set] : by_target) {
      const std::vector<std::string> heads =
          form == TextForm::kJsonString ? json_encodings(set) : std::vector<std::string>{class_expr(set)};
      for (const std::string& head : heads) body += (body.empty() ? "" : " | ") + head + " " + rule_of(size_t(target));
    }
    if (dfa.states[s].accepting) body += body.empty() ? "\"\"" : " | \"\"";
    rules[rule_of(s)] = body;
  }
  return rule_of(0);
}

}  // namespace autoglm
