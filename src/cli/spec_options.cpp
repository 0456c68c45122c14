#include "cli/spec_options.h"

namespace autoglm::cli {

void add_spec_options(CLI::App& cmd, SpecOptions& o) {
  cmd.add_option("--spec", o.method,
                 "Speculative decoding: none, draft, ngram, early-exit, mtp (the model's NextN block)");
  cmd.add_option("--draft", o.draft, "Draft model (GGUF file or Hugging Face folder) for --spec draft");
  cmd.add_option("--draft-quantize", o.draft_quantize,
                 "Draft weights re-encoded at load (q8_0, q4_0, ...; auto: the type that decodes fastest here); "
                 "without --draft, the target's own weights");
  cmd.add_option("--draft-max", o.draft_max, "Most tokens drafted per target pass");
  cmd.add_option("--draft-min", o.draft_min, "Fewer drafts than this: a plain decode step");
  cmd.add_option("--draft-p-min", o.p_min, "Stop drafting where the drafter's confidence is below this");
  cmd.add_option("--exit-layer", o.exit_layer, "Early exit: the layers that draft (0: a quarter)");
}

Status SpecOptions::apply_to(RuntimeOptions& o) const {
  auto parsed = spec_method_from_name(method);
  if (!parsed) return Status(parsed.status().code(), "speculative: " + parsed.status().message());
  o.speculative = *parsed;
  o.draft_model = draft;
  o.draft_quantize = draft_quantize;
  o.draft_max = draft_max;
  o.draft_min = draft_min;
  o.draft_p_min = p_min;
  o.exit_layer = exit_layer;
  return Status::ok();
}

}  // namespace autoglm::cli
