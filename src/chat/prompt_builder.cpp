#include "chat/prompt_builder.h"

namespace autoglm {

using nlohmann::ordered_json;

PromptBuilder::PromptBuilder(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                             GrammarLimits grammar_limits, std::optional<ToolCallFamily> family)
    : template_(chat_template),
      tokenizer_(tokenizer),
      family_(family.value_or(tool_call_family(chat_template.source()))),
      grammar_limits_(grammar_limits),
      markers_(tokenizer.vocab()) {}

ordered_json PromptBuilder::special_token_variables() const {
  const Vocab& v = tokenizer_.vocab();
  return {{"bos_token", v.bos >= 0 ? v.pieces[size_t(v.bos)] : ""},
          {"eos_token", v.eos >= 0 ? v.pieces[size_t(v.eos)] : ""}};
}

std::vector<int32_t> PromptBuilder::encode(const std::string& text, bool parse_special,
                                           const std::vector<Tokenizer::ByteRange>& plain, size_t max_tokens) const {
  const Vocab& v = tokenizer_.vocab();
  const std::string& bos = v.bos >= 0 ? v.pieces[size_t(v.bos)] : "";
  const bool has_bos = !bos.empty() && text.compare(0, bos.size(), bos) == 0;
  return tokenizer_.encode(text, /*add_special=*/!has_bos, parse_special, plain, max_tokens);
}

// Refused from the text's length when that alone passes the cap, else as soon as the ids
// encoded so far do: a prompt the limits refuse is never encoded whole.
Result<std::vector<int32_t>> PromptBuilder::encode_within(const std::string& text, bool parse_special,
                                                          const std::vector<Tokenizer::ByteRange>& plain,
                                                          const TokenCap& cap) const {
  const size_t least = tokenizer_.min_tokens(text.size());
  if (least > cap.tokens)
    return out_of_range("the prompt has at least " + std::to_string(least) + " tokens (" + std::to_string(text.size()) +
                        " bytes), " + cap.over);
  std::vector<int32_t> ids = encode(text, parse_special, plain, cap.tokens);
  if (ids.size() > cap.tokens)
    return out_of_range("the prompt has more than " + std::to_string(cap.tokens) + " tokens, " + cap.over);
  return ids;
}

std::vector<int32_t> PromptBuilder::encode_text(const std::string& text) const {
  return encode(text, /*parse_special=*/false);
}

Result<std::vector<int32_t>> PromptBuilder::encode_text(const std::string& text, const TokenCap& cap) const {
  return encode_within(text, /*parse_special=*/false, {}, cap);
}

Result<Prompt> PromptBuilder::build(const PromptRequest& request, std::string* error_param) const {
  auto fail = [&](const char* param, const Status& status) {
    if (error_param) *error_param = param;
    return status;
  };
  const bool show_tools = request.tool_choice != ToolChoice::kNone && request.tools.is_array();
  // Request and tool text is untrusted: its control-token markers stay text (marker_guard.h).
  MarkerGuard guard(markers_);
  ordered_json messages = request.messages, tools = show_tools ? request.tools : ordered_json();
  for (auto& m : messages)  // an earlier turn's reasoning, under gpt-oss's name for it too
    if (m.is_object() && m.contains("reasoning_content") && !m.contains("thinking"))
      m["thinking"] = m["reasoning_content"];
  ordered_json kwargs = request.template_kwargs;
  guard.hide(messages);
  guard.hide(tools);
  guard.hide(kwargs);
  ordered_json variables = special_token_variables();
  for (const auto& [k, v] : kwargs.items()) variables[k] = v;
  auto text = template_.render(messages, tools, request.add_generation_prompt, variables);
  if (!text) return fail("messages", text.status());
  Prompt prompt;
  std::vector<Tokenizer::ByteRange> plain;
  prompt.text = guard.restore(*text, plain);
  auto ids = encode_within(prompt.text, /*parse_special=*/true, plain, request.cap);
  if (!ids) return fail("messages", ids.status());
  prompt.ids = std::move(ids).value();
  if (request.tool_choice == ToolChoice::kRequired || request.tool_choice == ToolChoice::kNamed) {
    const bool named = request.tool_choice == ToolChoice::kNamed;
    auto gbnf = tool_call_grammar(family_, request.tools, named ? request.tool_name : "");
    if (!gbnf) return fail(named ? "tool_choice" : "tools", gbnf.status());
    auto grammar = Grammar::parse(*gbnf, grammar_limits_);
    if (!grammar) return fail("tools", grammar.status());
    prompt.forced_call = *grammar;
  }
  return prompt;
}

}  // namespace autoglm
