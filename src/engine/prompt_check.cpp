#include "engine/prompt_check.h"

#include <string>

namespace autoglm {

Status check_prompt_fits(int64_t n_prompt, int64_t n_ctx) {
  if (n_prompt + 1 <= n_ctx) return Status::ok();
  return out_of_range("the prompt has " + std::to_string(n_prompt) +
                      " tokens, which does not fit the context window of " + std::to_string(n_ctx) +
                      " tokens (with room for one generated token)");
}

}  // namespace autoglm
