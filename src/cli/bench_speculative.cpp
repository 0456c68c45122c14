#include "cli/bench_speculative.h"

#include <cstdio>

#include "cli/common.h"
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
  }
  const MeanSd p = mean_and_sd(plain_tps), f = mean_and_sd(fast_tps);
  const char* method = spec_method_name(spec.config.method);
  std::printf("  tg%d plain (generator, greedy): %.2f ± %.2f tok/s\n", n_gen, p.mean, p.sd);
  std::printf(
      "  tg%d spec %s: %.2f ± %.2f tok/s = %.2fx plain; drafted %lld, accepted %lld (%.1f%%), %.2f tokens "
      "per target pass (last repetition; same tokens as plain)\n",
      n_gen, method, f.mean, f.sd, f.mean / p.mean, (long long)stats.drafted, (long long)stats.accepted,
      100.0 * stats.acceptance(), stats.tokens_per_pass());
  std::fflush(stdout);
  return Status::ok();
}

}  // namespace autoglm::cli
