#include "engine/speculative.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "core/log.h"
#include "kernels/cpu/decode_speed.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {
namespace {

constexpr std::array<std::pair<SpecMethod, const char*>, 5> kMethodNames = {{
    {SpecMethod::kNone, "none"},
    {SpecMethod::kDraft, "draft"},
    {SpecMethod::kNgram, "ngram"},
    {SpecMethod::kEarlyExit, "early-exit"},
    {SpecMethod::kMtp, "mtp"},
}};

// Passes a drafter stays off after a pass that accepted nothing: doubles while it keeps failing.
constexpr int32_t kFirstBackoff = 4, kLongestBackoff = 64;
// The acceptance a drafter starts with (as if it had drafted four tokens and kept three), and
// how much of the past each pass keeps.
constexpr double kPriorKept = 3, kPriorRejected = 1, kFade = 0.8;

}  // namespace

Result<SpecMethod> spec_method_from_name(std::string_view name) {
  for (const auto& [method, text] : kMethodNames)
    if (name == text) return method;
  return invalid_argument("spec: '" + std::string(name) +
                          "' is not a speculation method (none, draft, ngram, early-exit, mtp)");
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

Status check_mtp_layers(const std::string& model, int64_t n_nextn, int64_t bound) {
  if (n_nextn == 0)
    return invalid_argument("spec mtp: the model " + model +
                            " has no NextN (MTP) layer to draft with (nextn_predict_layers is 0); use another method");
  if (bound == 0)
    return invalid_argument(
        "spec mtp: the model " + model + " declares " + std::to_string(n_nextn) +
        " NextN layer(s) but its file lacks their tensors (blk.N.nextn.*): convert it keeping them");
  return Status::ok();
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

Result<DType> auto_draft_type(ThreadPool& pool, std::optional<DType> target_type) {
  constexpr int64_t kCols = 2048;
  std::vector<DType> candidates;
  for (DType t : {DType::Q8_0, DType::Q4_K, DType::Q4_0})  // the more accurate first: they win ties
    if (!target_type || dtype_row_bytes(t, kCols) * 4 < dtype_row_bytes(*target_type, kCols) * 3)
      candidates.push_back(t);
  if (candidates.empty())
    return invalid_argument("draft-quantize: auto: the target's weights (" + std::string(dtype_name(*target_type)) +
                            ") are no larger than any draft type's; give a smaller draft model (--draft)");
  const auto began = std::chrono::steady_clock::now();
  const std::vector<cpu::DecodeSpeed> speeds = cpu::measure_decode_speed(pool, candidates, kCols);
  const DType chosen = cpu::fastest_type(speeds);
  std::string line = "speculative: draft-quantize auto: " + std::string(dtype_name(chosen)) + " (one-token matmul:";
  for (const cpu::DecodeSpeed& s : speeds) {
    const std::string_view name = dtype_name(s.type);
    char figure[64];
    std::snprintf(figure, sizeof figure, " %.*s %.1f ms/Gweight", int(name.size()), name.data(), s.ns_per_weight * 1e3);
    line += figure;
  }
  char took[48];
  std::snprintf(took, sizeof took, "; measured in %.0f ms)",
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count());
  log_line(LogLevel::kInfo, line + took);
  return chosen;
}

Result<std::unique_ptr<Model>> load_draft_model(const DraftSource& source, const std::string& target_path,
                                                const Vocab& target) {
  if (source.path.empty() && source.quantize.empty())
    return invalid_argument(
        "spec draft: give a draft model (--draft) or a type for the target's own weights "
        "(--draft-quantize, a quantized self-draft)");
  ModelLoadOptions options;
  if (source.quantize == "auto") {
    if (!source.pool) return invalid_argument("draft-quantize: 'auto' needs the threads to measure on");
    AUTOGLM_ASSIGN_OR_RETURN(options.quantize,
                             auto_draft_type(*source.pool, source.path.empty() ? source.target_type : std::nullopt));
  } else if (!source.quantize.empty()) {
    const auto type = dtype_from_name(source.quantize);
    if (!type) return invalid_argument("draft-quantize: '" + source.quantize + "' is not a weight type (or auto)");
    options.quantize = *type;
  }
  auto model = Model::load(source.path.empty() ? target_path : source.path, options);
  if (!model) return Status(model.status().code(), "draft model: " + model.status().message());
  auto tokenizer = (*model)->load_tokenizer();
  if (!tokenizer) return Status(tokenizer.status().code(), "draft model: " + tokenizer.status().message());
  AUTOGLM_RETURN_IF_ERROR(check_same_vocabulary(target, (*tokenizer)->vocab()));
  return model;
}

DraftLength::DraftLength(int32_t max_len, int32_t min_len, double token_cost)
    : max_len_(max_len),
      min_len_(std::min(min_len, max_len)),
      token_cost_(token_cost),
      kept_(kPriorKept),
      rejected_(kPriorRejected),
      backoff_(kFirstBackoff) {}

double DraftLength::yield(int32_t k) const {
  const double p = acceptance();
  const double tokens = p > 0.9999 ? double(k + 1) : (1 - std::pow(p, k + 1)) / (1 - p);
  return tokens / (1 + (token_cost_ + kVerifyTokenCost) * double(k));
}

int32_t DraftLength::next() const {
  if (off_passes_ > 0) return 0;
  int32_t best = 1;
  double most = yield(1);
  for (int32_t k = 2; k <= max_len_; ++k)
    if (const double y = yield(k); y > most) best = k, most = y;
  return std::max(min_len_, best);
}

void DraftLength::record(int32_t drafted, int32_t accepted) {
  if (drafted == 0) {
    if (off_passes_ > 0) --off_passes_;
    return;
  }
  kept_ = kept_ * kFade + accepted;
  rejected_ = rejected_ * kFade + (accepted < drafted ? 1 : 0);
  if (accepted > 0) {
    backoff_ = kFirstBackoff;
  } else if (yield(1) <= 1) {  // drafting costs more than it brings
    off_passes_ = backoff_;
    backoff_ = std::min(kLongestBackoff, backoff_ * 2);
  }
}

}  // namespace autoglm
