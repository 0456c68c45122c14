// Perplexity over a text and the KL-divergence of a model against saved base log-probabilities,
// by llama-perplexity's rules so that the numbers compare: the text's tokens (BOS as the model
// asks) cut into chunks of n_ctx, each chunk's first token replaced by BOS (when the model has
// one), the second half of each chunk scored (positions n_ctx/2 .. n_ctx-2 predicting the next
// token). The base file is llama-perplexity's --kl-divergence-base format, either way round.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "autoglm/runtime.h"
#include "autoglm/status.h"

namespace autoglm {

// A mean and its standard error.
struct Estimate {
  double value = 0, error = 0;
};

// The model's distributions against the base's, over every scored position.
struct KlDivergenceStats {
  Estimate ppl, base_ppl;      // exp(mean NLL) of each
  Estimate ln_ppl_ratio;       // mean ln(PPL / base PPL)
  double ppl_correlation = 0;  // of the two NLL series
  Estimate kld;                // mean KL(base || model), terms of base log-prob <= -16 dropped
  double kld_max = 0, kld_p99_9 = 0, kld_p99 = 0, kld_p95 = 0, kld_p90 = 0, kld_median = 0, kld_p10 = 0, kld_p5 = 0,
         kld_p1 = 0, kld_p0_1 = 0, kld_min = 0;
  Estimate delta_p;      // mean of p(next token) - base p(next token)
  Estimate rms_delta_p;  // root mean square of the same
  Estimate same_top;     // share of positions whose most likely token is the base's
  double delta_p_max = 0, delta_p_p99_9 = 0, delta_p_p99 = 0, delta_p_p95 = 0, delta_p_p90 = 0, delta_p_p75 = 0,
         delta_p_median = 0, delta_p_p25 = 0, delta_p_p10 = 0, delta_p_p5 = 0, delta_p_p1 = 0, delta_p_p0_1 = 0,
         delta_p_min = 0;
};

// After each chunk: running figures (KL ones only when comparing; their percentiles are left 0).
struct PerplexityProgress {
  int64_t chunk = 0, n_chunk = 0;  // chunks done, of
  double ppl = 0;                  // running
  double seconds = 0;              // since the first chunk started
  std::optional<KlDivergenceStats> kl;
};

struct PerplexityOptions {
  int64_t n_ctx = 512;      // tokens per chunk (llama-perplexity's -c)
  int64_t max_chunks = -1;  // -1: every whole chunk of the text (ignored with kl_base: the file's)
  // --kl-divergence-base alone: write each scored position's log-probabilities here.
  std::string save_base;
  // --kl-divergence: compare with this file (its tokens and n_ctx; no text needed).
  std::string kl_base;
  std::function<void(const PerplexityProgress&)> on_chunk;
};

struct PerplexityReport {
  int64_t n_ctx = 0, n_chunk = 0, tokens = 0, scored = 0;  // tokens: of the text
  Estimate ppl;                                            // exp(mean NLL), its error by the delta method
  std::optional<KlDivergenceStats> kl;
};

// Errors: a text shorter than two chunks (naming its token count), a base file of another
// vocabulary or a context this model cannot hold, a file cut short or not of this format.
Result<PerplexityReport> measure_perplexity(Runtime& runtime, const std::string& text,
                                            const PerplexityOptions& options = {});

}  // namespace autoglm
