// The speculative-decoding options that run, bench and serve share: --spec, --draft,
// --draft-quantize, --draft-max, --draft-min, --draft-p-min, --exit-layer.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "autoglm/runtime.h"

namespace autoglm::cli {

struct SpecOptions {
  std::string method = "none";
  std::string draft;           // a draft model file or folder
  std::string draft_quantize;  // the draft's weights re-encoded at load (alone: the target's own)
  int32_t draft_max = 8;       // most tokens drafted per target pass
  int32_t draft_min = 0;       // fewer drafted than this: a plain decode step instead
  float p_min = 0.0f;          // drafting stops where the drafter's confidence falls below this
  int32_t exit_layer = 0;      // early exit: the layers that draft (0: a quarter of the model)
  // As the runtime's options (speculative, draft_model, draft_max, ...): the runtime loads the draft.
  // An unknown method is an error ("speculative: spec: 'x' is not a speculation method ...").
  Status apply_to(RuntimeOptions& options) const;
};

void add_spec_options(CLI::App& cmd, SpecOptions& options);

}  // namespace autoglm::cli
