// Chat templates: the model's own Jinja template (tokenizer.chat_template), or a
// built-in one by name, rendered the way Hugging Face's apply_chat_template does.
#pragma once

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autoglm/status.h"

namespace autoglm {

namespace jinja {
struct Node;
}

class ChatTemplate {
 public:
  // Parses a template; the error names the line.
  static Result<ChatTemplate> parse(const std::string& source);
  // "chatml", "llama2", "llama3", "glm4".
  static Result<ChatTemplate> builtin(const std::string& name);
  static const std::vector<std::string>& builtin_names();

  // messages: [{"role", "content", ...}]; tools: array or null; variables: special tokens
  // (bos_token, eos_token...) and extra context (enable_thinking...), all top-level.
  // Templates are untrusted: a render that nests, loops or grows strings past the limits of
  // jinja/limits.h ends with an error naming the limit.
  Result<std::string> render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                             bool add_generation_prompt, const nlohmann::ordered_json& variables) const;

  const std::string& source() const { return source_; }
  // Renders stop at their next step, with an error, once *flag is true (server shutdown).
  void set_cancel_flag(const std::atomic<bool>* flag) { cancel_ = flag; }
  void set_limits(int64_t max_steps, size_t max_output_bytes) {
    max_steps_ = max_steps;
    max_output_bytes_ = max_output_bytes;
  }

 private:
  std::string source_;
  std::shared_ptr<const std::vector<std::unique_ptr<jinja::Node>>> body_;
  const std::atomic<bool>* cancel_ = nullptr;
  int64_t max_steps_ = 4'000'000;
  size_t max_output_bytes_ = size_t(32) << 20;
};

}  // namespace autoglm
