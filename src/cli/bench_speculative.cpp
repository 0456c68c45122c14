#include "cli/bench_speculative.h"

#include <algorithm>
#include <cstdio>

#include "cli/bench_common.h"
#include "engine/generator.h"

namespace autoglm::cli {
namespace {

constexpr int32_t kPromptTokens = 32;

// A sentence said over and over (an n-gram drafter has something to copy; a model drafter
// does not care).
std::vector<int32_t> bench_prompt(const Tokenizer& tokenizer) {
  std::vector<int32_t> sentence = tokenizer.encode(" Once upon a time, there was a little dog.", false);
  if (sentence.empty()) sentence = {0};
  std::vector<int32_t> ids = tokenizer.encode("", true);  // BOS where the vocabulary wants one
  while (int32_t(ids.size()) < kPromptTokens) ids.insert(ids.end(), sentence.begin(), sentence.end());
  return ids;
}

// Where a speculative generation's time went: drafting, the target's verifying passes (against
// a plain decode step, the cost of one token), and the rest (sampling, the walk over the rows).
void print_time_breakdown(const SpecStats& s, double total_seconds, double plain_step_ms) {
  if (total_seconds <= 0 || s.target_passes == 0) return;
  const double rest = total_seconds - s.draft_seconds - s.verify_seconds;
  const double drafted = double(std::max<int64_t>(1, s.drafted));
  std::printf(
      "  time (last repetition): drafting %.1f%% (%.2f ms per drafted token), verifying %.1f%% (%.2f ms per pass "
      "of %.2f tokens; a plain step %.2f ms), the rest %.1f%% (sampling, bookkeeping)\n",
      100 * s.draft_seconds / total_seconds, 1e3 * s.draft_seconds / drafted, 100 * s.verify_seconds / total_seconds,
      1e3 * s.verify_seconds / double(s.target_passes), 1.0 + double(s.drafted) / double(s.target_passes),
      plain_step_ms, 100 * rest / total_seconds);
}

}  // namespace

Status bench_speculation(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool, const Speculation& spec,
                         int32_t n_gen, int32_t reps, DType kv_type) {
  GenerationRequest request;
  request.prompt = bench_prompt(tokenizer);
  request.max_tokens = n_gen;
  request.sampling.temperature = 0;
  request.ignore_eos = true;
  const int64_t n_ctx = int64_t(request.prompt.size()) + n_gen + 1;
  Generator plain(model, tokenizer, pool, n_ctx, kv_type);
  Generator fast(model, tokenizer, pool, n_ctx, kv_type);
  AUTOGLM_RETURN_IF_ERROR(fast.set_speculation(spec.config, spec.draft.get()));
  std::vector<double> plain_tps, fast_tps;
  SpecStats stats;
  double plain_step_ms = 0, spec_seconds = 0;
  for (int32_t r = 0; r <= reps; ++r) {  // repetition 0 warms up
    AUTOGLM_ASSIGN_OR_RETURN(const GenerationResult a, plain.generate(request));
    AUTOGLM_ASSIGN_OR_RETURN(const GenerationResult b, fast.generate(request));
    if (a.tokens != b.tokens)
      return Status(StatusCode::kInternal,
                    "speculative output differs from plain decoding's (a bug: please report it)");
    if (r == 0) continue;
    plain_tps.push_back(double(a.tokens.size() - 1) / a.decode_seconds);
    fast_tps.push_back(double(b.tokens.size() - 1) / b.decode_seconds);
    stats = b.spec;
    plain_step_ms = 1e3 * a.decode_seconds / double(a.tokens.size() - 1);
    spec_seconds = b.decode_seconds;
  }
  const MeanSd p = mean_and_sd(plain_tps), f = mean_and_sd(fast_tps);
  const char* method = spec_method_name(spec.config.method);
  std::printf("  tg%d plain (generator, greedy): %.2f ± %.2f tok/s\n", n_gen, p.mean, p.sd);
  std::printf(
      "  tg%d spec %s: %.2f ± %.2f tok/s = %.2fx plain; drafted %lld, accepted %lld (%.1f%%), %.2f tokens "
      "per target pass (last repetition; same tokens as plain)\n",
      n_gen, method, f.mean, f.sd, f.mean / p.mean, (long long)stats.drafted, (long long)stats.accepted,
      100.0 * stats.acceptance(), stats.tokens_per_pass());
  print_time_breakdown(stats, spec_seconds, plain_step_ms);
  std::fflush(stdout);
  return Status::ok();
}

Result<Speculation> prepare_speculation(const SpecOptions& o, const std::string& target_path, const Model& target,
                                        const Vocab& target_vocab, ThreadPool& pool) {
  Speculation s;
  s.config.draft_max = o.draft_max;
  s.config.draft_min = o.draft_min;
  s.config.p_min = o.p_min;
  s.config.exit_layer = o.exit_layer;
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
