// The speculative-decoding options that run, bench and serve share: --spec, --draft,
// --draft-quantize, --draft-max, --draft-min, --draft-p-min, --exit-layer.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "autoglm/runtime.h"
#include "engine/speculative.h"
#include "model/model.h"

namespace autoglm::cli {

struct SpecOptions {
  std::string method = "none";
  std::string draft;           // a draft model file or folder
  std::string draft_quantize;  // the draft's weights re-encoded at load (alone: the target's own)
  SpecConfig config;
  // As the runtime's options (speculative, draft_model, draft_max, ...): the runtime loads the draft.
  // An unknown method is an error ("speculative: spec: 'x' is not a speculation method ...").
  Status apply_to(RuntimeOptions& options) const;
};

void add_spec_options(CLI::App& cmd, SpecOptions& options);

// The options checked, and the draft model loaded where the method needs one.
struct Speculation {
  SpecConfig config;
  std::unique_ptr<Model> draft;
};
// `pool`: the threads --draft-quantize auto measures on.
Result<Speculation> prepare_speculation(const SpecOptions& options, const std::string& target_path, const Model& target,
                                        const Vocab& target_vocab, ThreadPool& pool);

}  // namespace autoglm::cli
