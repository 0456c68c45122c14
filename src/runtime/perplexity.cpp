// measure_perplexity: chunks of the text (or of a base file's tokens) through Runtime::logits,
// scored by llama-perplexity's rules (autoglm/perplexity.h).
#include "autoglm/perplexity.h"

#include <chrono>
#include <optional>

#include "formats/log_prob_file.h"
#include "runtime/perplexity_stats.h"

namespace autoglm {
namespace {

// The chunks to evaluate: their tokens, n_ctx each, unaltered (BOS goes in at evaluation).
struct Chunks {
  int64_t n_ctx = 0, n_chunk = 0, text_tokens = 0;
  std::vector<int32_t> tokens;
};

Result<Chunks> chunks_of_text(Runtime& rt, const std::string& text, const PerplexityOptions& o) {
  if (o.n_ctx < 4) return invalid_argument("--ctx-size: " + std::to_string(o.n_ctx) + " is too small (at least 4)");
  std::string body = text;
  if (!body.empty() && body.back() == '\n') body.pop_back();  // one trailing newline, as llama-perplexity
  Chunks c;
  c.n_ctx = o.n_ctx;
  c.tokens = rt.encode(body, true);
  c.text_tokens = int64_t(c.tokens.size());
  if (c.text_tokens < 2 * o.n_ctx)
    return invalid_argument("the text has " + std::to_string(c.text_tokens) + " tokens: at least 2 x --ctx-size (" +
                            std::to_string(2 * o.n_ctx) + ") are needed");
  c.n_chunk = c.text_tokens / o.n_ctx;
  if (o.max_chunks >= 0) c.n_chunk = std::min(c.n_chunk, o.max_chunks);
  c.tokens.resize(size_t(c.n_chunk * c.n_ctx));
  return c;
}

Status check_base(const LogProbHeader& h, Runtime& rt, const std::string& path) {
  if (h.n_vocab != rt.info().n_vocab)
    return invalid_argument(path + ": saved for a vocabulary of " + std::to_string(h.n_vocab) +
                            " tokens; this model has " + std::to_string(rt.info().n_vocab));
  if (rt.info().n_ctx > 0 && h.n_ctx > rt.info().n_ctx)
    return invalid_argument(path + ": chunks of " + std::to_string(h.n_ctx) + " tokens; this model's context is " +
                            std::to_string(rt.info().n_ctx));
  return Status::ok();
}

bool adds_bos(Runtime& rt) {
  const int32_t bos = rt.special_tokens().bos;
  const auto ids = rt.encode("", true);
  return bos >= 0 && !ids.empty() && ids.front() == bos;
}

class Scorer {
 public:
  Scorer(Runtime& rt, const PerplexityOptions& o, int64_t n_vocab) : rt_(rt), options_(o), n_vocab_(n_vocab) {}

  Result<PerplexityReport> run(const Chunks& c, LogProbWriter* save, LogProbReader* base) {
    const bool bos = adds_bos(rt_);
    const int64_t first = c.n_ctx / 2;
    const auto start = std::chrono::steady_clock::now();
    std::vector<float> log_q(static_cast<size_t>(n_vocab_)), log_p;
    for (int64_t ch = 0; ch < c.n_chunk; ++ch) {
      std::vector<int32_t> input(c.tokens.begin() + ch * c.n_ctx, c.tokens.begin() + (ch + 1) * c.n_ctx);
      if (bos) input[0] = rt_.special_tokens().bos;
      AUTOGLM_ASSIGN_OR_RETURN(const auto logits, rt_.logits(input, true));
      for (int64_t p = first; p < c.n_ctx - 1; ++p) {
        const float* row = logits.data() + p * n_vocab_;
        const int32_t next = c.tokens[size_t(ch * c.n_ctx + p + 1)];
        log_softmax(row, n_vocab_, log_q.data());
        nll_.add(-double(log_q[size_t(next)]));
        if (save) AUTOGLM_RETURN_IF_ERROR(save->append(row));
        if (base) {
          AUTOGLM_RETURN_IF_ERROR(base->next(log_p));
          kl_.add(log_q.data(), log_p.data(), n_vocab_, next);
        }
      }
      report_progress(ch + 1, c.n_chunk, base != nullptr, start);
    }
    PerplexityReport r;
    r.n_ctx = c.n_ctx, r.n_chunk = c.n_chunk, r.tokens = c.text_tokens, r.scored = nll_.count;
    r.ppl = nll_.ppl();
    if (base) r.kl = kl_.stats();
    return r;
  }

 private:
  void report_progress(int64_t done, int64_t total, bool comparing, std::chrono::steady_clock::time_point start) const {
    if (!options_.on_chunk) return;
    PerplexityProgress p;
    p.chunk = done, p.n_chunk = total, p.ppl = nll_.ppl().value;
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (comparing) p.kl = kl_.stats(false);  // running means; the percentiles only in the report
    options_.on_chunk(p);
  }

  Runtime& rt_;
  const PerplexityOptions& options_;
  int64_t n_vocab_;
  NllSums nll_;
  KlSums kl_;
};

}  // namespace

Result<PerplexityReport> measure_perplexity(Runtime& rt, const std::string& text, const PerplexityOptions& o) {
  const int64_t n_vocab = rt.info().n_vocab;
  Scorer scorer(rt, o, n_vocab);
  if (!o.kl_base.empty()) {
    AUTOGLM_ASSIGN_OR_RETURN(auto base, LogProbReader::open(o.kl_base));
    AUTOGLM_RETURN_IF_ERROR(check_base(base.header(), rt, o.kl_base));
    Chunks c;
    c.n_ctx = base.header().n_ctx, c.n_chunk = base.header().n_chunk, c.tokens = base.header().tokens;
    c.text_tokens = int64_t(c.tokens.size());
    return scorer.run(c, nullptr, &base);
  }
  AUTOGLM_ASSIGN_OR_RETURN(const Chunks c, chunks_of_text(rt, text, o));
  std::optional<LogProbWriter> save;
  if (!o.save_base.empty()) {
    LogProbHeader h{int32_t(c.n_ctx), int32_t(n_vocab), int32_t(c.n_chunk), c.tokens};
    AUTOGLM_ASSIGN_OR_RETURN(save, LogProbWriter::create(o.save_base, h));
  }
  return scorer.run(c, save ? &*save : nullptr, nullptr);
}

}  // namespace autoglm
