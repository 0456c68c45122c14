#include "cli/spec_options.h"

namespace autoglm::cli {

void add_spec_options(CLI::App& cmd, SpecOptions& o) {
  cmd.add_option("--spec", o.method,
                 "Speculative decoding: none, draft, ngram, early-exit, mtp (the model's NextN block)");
  cmd.add_option("--draft", o.draft, "Draft model (GGUF file or Hugging Face folder) for --spec draft");
  cmd.add_option("--draft-quantize", o.draft_quantize,
                 "Draft weights re-encoded at load (q8_0, q4_0, ...; auto: the type that decodes fastest here); "
                 "without --draft, the target's own weights");
  cmd.add_option("--draft-max", o.config.draft_max, "Most tokens drafted per target pass");
  cmd.add_option("--draft-min", o.config.draft_min, "Fewer drafts than this: a plain decode step");
  cmd.add_option("--draft-p-min", o.config.p_min, "Stop drafting where the drafter's confidence is below this");
  cmd.add_option("--exit-layer", o.config.exit_layer, "Early exit: the layers that draft (0: a quarter)");
}

Status SpecOptions::apply_to(RuntimeOptions& o) const {
  auto parsed = spec_method_from_name(method);
  if (!parsed) return Status(parsed.status().code(), "speculative: " + parsed.status().message());
  o.speculative = *parsed;
  o.draft_model = draft;
  o.draft_quantize = draft_quantize;
  o.draft_max = config.draft_max;
  o.draft_min = config.draft_min;
  o.draft_p_min = config.p_min;
  o.exit_layer = config.exit_layer;
  return Status::ok();
}

Result<Speculation> prepare_speculation(const SpecOptions& o, const std::string& target_path, const Model& target,
                                        const Vocab& target_vocab, ThreadPool& pool) {
  Speculation s;
  s.config = o.config;
  AUTOGLM_ASSIGN_OR_RETURN(s.config.method, spec_method_from_name(o.method));
  AUTOGLM_RETURN_IF_ERROR(validate_spec_config(s.config, target.spec().n_layer));
  if (s.config.method == SpecMethod::kMtp)  // before any work that would come to nothing
    AUTOGLM_RETURN_IF_ERROR(
        check_mtp_layers(target_path, target.spec().n_nextn, int64_t(target.weights().nextn.size())));
  if (s.config.method != SpecMethod::kDraft) {
    if (!o.draft.empty() || !o.draft_quantize.empty())
      return invalid_argument("--draft/--draft-quantize: only with --spec draft");
    return s;
  }
  const DraftSource source{o.draft, o.draft_quantize, &pool, target.layer_weight_type()};
  AUTOGLM_ASSIGN_OR_RETURN(s.draft, load_draft_model(source, target_path, target_vocab));
  return s;
}

}  // namespace autoglm::cli
