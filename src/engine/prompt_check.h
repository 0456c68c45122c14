// The one check that a prompt leaves room for a token in the context, with its message.
#pragma once

#include <cstdint>

#include "autoglm/status.h"

namespace autoglm {

Status check_prompt_fits(int64_t n_prompt, int64_t n_ctx);

}  // namespace autoglm
