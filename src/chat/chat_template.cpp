#include "chat/chat_template.h"

#include "chat/jinja/interpreter.h"
#include "chat/jinja/parser.h"

namespace autoglm {
namespace {

struct Builtin {
  std::string name;
  std::string source;
};

// Fallbacks for files without a template; each follows its family's published format.
const std::vector<Builtin>& builtins() {
  static const std::vector<Builtin> b = {
      {"chatml",
       "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
       "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"},
      {"llama2",
       "{%- if messages and messages[0].role == 'system' %}{%- set system = messages[0].content %}"
       "{%- set messages = messages[1:] %}{%- else %}{%- set system = '' %}{%- endif %}"
       "{%- for message in messages %}"
       "{%- if message.role == 'user' %}{{- bos_token + '[INST] ' }}"
       "{%- if loop.first and system %}{{- '<<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' }}{%- endif %}"
       "{{- message.content | trim + ' [/INST]' }}"
       "{%- elif message.role == 'assistant' %}{{- ' ' + message.content | trim + ' ' + eos_token }}{%- endif %}"
       "{%- endfor %}"},
      {"llama3",
       "{{- bos_token }}{%- for message in messages %}"
       "{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + message.content | trim + '<|eot_id|>' }}"
       "{%- endfor %}{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
       "{%- endif %}"},
      {"glm4",
       "[gMASK]<sop>{%- for message in messages %}{{- '<|' + message.role + '|>\\n' + message.content }}{%- endfor %}"
       "{%- if add_generation_prompt %}{{- '<|assistant|>' }}{%- endif %}"},
  };
  return b;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(const std::string& source) {
  ChatTemplate t;
  t.source_ = source;
  try {
    t.body_ = std::make_shared<const jinja::Body>(jinja::parse_template(source));
  } catch (const jinja::Error& e) {
    return invalid_argument(std::string("chat template: ") + e.what());
  }
  return t;
}

const std::vector<std::string>& ChatTemplate::builtin_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& b : builtins()) n.push_back(b.name);
    return n;
  }();
  return names;
}

Result<ChatTemplate> ChatTemplate::builtin(const std::string& name) {
  for (const auto& b : builtins())
    if (b.name == name) return parse(b.source);
  return not_found("no built-in chat template '" + name + "' (chatml, llama2, llama3, glm4)");
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                         bool add_generation_prompt, const nlohmann::ordered_json& variables) const {
  jinja::Object vars;
  if (variables.is_object())
    for (const auto& [k, v] : variables.items()) vars.set(k, jinja::from_json(v));
  vars.set("messages", jinja::from_json(messages));
  vars.set("tools", tools.is_null() ? jinja::Value::none() : jinja::from_json(tools));
  vars.set("documents", jinja::Value::none());
  vars.set("add_generation_prompt", jinja::Value(add_generation_prompt));
  try {
    jinja::RenderLimits limits;
    limits.cancel = cancel_;
    limits.max_steps = max_steps_;
    limits.max_output_bytes = max_output_bytes_;
    return jinja::render(*body_, vars, limits);
  } catch (const jinja::Error& e) {
    return invalid_argument(std::string("chat template: ") + e.what());
  }
}

}  // namespace autoglm
