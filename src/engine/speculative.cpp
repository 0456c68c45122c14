#include "engine/speculative.h"

#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>

namespace autoglm {
namespace {

constexpr std::array<std::pair<SpecMethod, const char*>, 4> kMethodNames = {{
    {SpecMethod::kNone, "none"},
    {SpecMethod::kDraft, "draft"},
    {SpecMethod::kNgram, "ngram"},
    {SpecMethod::kEarlyExit, "early-exit"},
}};

// Passes a drafter stays off after a pass that accepted nothing: doubles while it keeps failing.
constexpr int32_t kFirstBackoff = 4, kLongestBackoff = 64;
// A drafter starts short (one that the target disagrees with costs little) and doubles while
// the target accepts everything.
constexpr int32_t kFirstLength = 2;

}  // namespace

Result<SpecMethod> spec_method_from_name(const std::string& name) {
  for (const auto& [method, text] : kMethodNames)
    if (name == text) return method;
  return invalid_argument("spec: '" + name + "' is not a speculation method (none, draft, ngram, early-exit)");
}

const char* spec_method_name(SpecMethod m) {
  for (const auto& [method, text] : kMethodNames)
    if (m == method) return text;
  return "?";
}

Status validate_spec_config(const SpecConfig& c, int64_t n_layer) {
  if (c.draft_max < 1 || c.draft_max > 64) return invalid_argument("draft-max: must be in [1, 64]");
  if (c.draft_min < 0 || c.draft_min > c.draft_max) return invalid_argument("draft-min: must be in [0, draft-max]");
  if (!(c.p_min >= 0.0f && c.p_min <= 1.0f)) return invalid_argument("draft-p-min: must be in [0, 1]");
  if (c.exit_layer < 0 || c.exit_layer >= n_layer)
    return invalid_argument("exit-layer: must be in [1, " + std::to_string(n_layer - 1) + "] (the model has " +
                            std::to_string(n_layer) + " layers; 0 picks a quarter)");
  if (c.ngram_min < 1 || c.ngram_max < c.ngram_min) return invalid_argument("ngram sizes: need 1 <= min <= max");
  return Status::ok();
}

int32_t early_exit_layers(const SpecConfig& c, int64_t n_layer) {
  return c.exit_layer > 0 ? c.exit_layer : std::max<int32_t>(1, int32_t(n_layer / 4));
}

Status check_same_vocabulary(const Vocab& target, const Vocab& draft) {
  if (target.size() != draft.size())
    return invalid_argument("draft model: its vocabulary has " + std::to_string(draft.size()) +
                            " tokens, the target's " + std::to_string(target.size()));
  for (int32_t id = 0; id < target.size(); ++id)
    if (target.pieces[size_t(id)] != draft.pieces[size_t(id)])
      return invalid_argument("draft model: token " + std::to_string(id) + " is '" + draft.pieces[size_t(id)] +
                              "', the target's is '" + target.pieces[size_t(id)] + "' (the vocabularies differ)");
  if (target.bos != draft.bos || target.eos != draft.eos)
    return invalid_argument("draft model: BOS/EOS ids " + std::to_string(draft.bos) + "/" + std::to_string(draft.eos) +
                            " differ from the target's " + std::to_string(target.bos) + "/" +
                            std::to_string(target.eos));
  return Status::ok();
}

Result<std::unique_ptr<Model>> load_draft_model(const DraftSource& source, const std::string& target_path,
                                                const Vocab& target) {
  if (source.path.empty() && source.quantize.empty())
    return invalid_argument(
        "spec draft: give a draft model (--draft) or a type for the target's own weights "
        "(--draft-quantize, a quantized self-draft)");
  ModelLoadOptions options;
  if (!source.quantize.empty()) {
    const auto type = dtype_from_name(source.quantize);
    if (!type) return invalid_argument("draft-quantize: '" + source.quantize + "' is not a weight type");
    options.quantize = *type;
  }
  auto model = Model::load(source.path.empty() ? target_path : source.path, options);
  if (!model) return Status(model.status().code(), "draft model: " + model.status().message());
  auto tokenizer = (*model)->load_tokenizer();
  if (!tokenizer) return Status(tokenizer.status().code(), "draft model: " + tokenizer.status().message());
  AUTOGLM_RETURN_IF_ERROR(check_same_vocabulary(target, (*tokenizer)->vocab()));
  return model;
}

DraftLength::DraftLength(int32_t max_len, int32_t min_len)
    : max_len_(max_len),
      min_len_(std::min(min_len, max_len)),
      len_(std::min(max_len, kFirstLength)),
      backoff_(kFirstBackoff) {}

int32_t DraftLength::next() const {
  if (off_passes_ > 0) return 0;
  return std::max({int32_t(1), min_len_, len_});
}

void DraftLength::record(int32_t drafted, int32_t accepted) {
  if (drafted == 0) {
    if (off_passes_ > 0) --off_passes_;
    return;
  }
  if (accepted == drafted) {
    len_ = std::min(max_len_, 2 * len_);
    backoff_ = kFirstBackoff;
  } else if (accepted == 0) {
    len_ = 1;
    off_passes_ = backoff_;
    backoff_ = std::min(kLongestBackoff, backoff_ * 2);
  } else {
    len_ = accepted + 1;
    backoff_ = kFirstBackoff;
  }
}

}  // namespace autoglm
