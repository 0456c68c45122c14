// compute_imatrix: the model's forward pass over chunks of a text with an ImatrixCollector
// watching every matmul (autoglm/model_tools.h).
#include <chrono>

#include "autoglm/model_tools.h"
#include "core/thread_pool.h"
#include "model/imatrix_collector.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/runner.h"
#include "runtime/perplexity_stats.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {
namespace {

struct ImatrixRun {
  const Model& model;
  ModelRunner& runner;
  int64_t n_ctx;
  int32_t bos;  // -1: the vocabulary adds none
  NllSums nll;

  // One chunk through the model: every matmul's input is seen; the second half is scored.
  Status chunk(const int32_t* tokens) {
    std::vector<int32_t> input(tokens, tokens + n_ctx);
    if (bos >= 0) input[0] = bos;
    ContiguousKvCache cache(model.spec(), n_ctx + 1, DType::F16, model.device());
    Batch b;
    b.caches = {&cache};
    b.add_sequence_tokens(0, input.data(), n_ctx, 0, false, true);
    std::vector<float> logits;
    AUTOGLM_RETURN_IF_ERROR(runner.forward(b, logits));
    const int64_t n_vocab = model.spec().n_vocab;
    std::vector<float> log_p(static_cast<size_t>(n_vocab));
    for (int64_t p = n_ctx / 2; p < n_ctx - 1; ++p) {
      log_softmax(logits.data() + p * n_vocab, n_vocab, log_p.data());
      nll.add(-double(log_p[size_t(tokens[p + 1])]));
    }
    return Status::ok();
  }
};

Status save(const ImatrixCollector& collector, int64_t chunks, const ImatrixOptions& o, const std::string& out) {
  Imatrix m = collector.result();
  m.chunk_count = chunks;
  m.chunk_size = o.n_ctx;
  if (!o.dataset.empty()) m.datasets = {o.dataset};
  return write_imatrix(m, out);
}

}  // namespace

Result<ImatrixReport> compute_imatrix(const std::string& model_path, const std::string& text, const std::string& out,
                                      const ImatrixOptions& o) {
  if (o.n_ctx < 4) return invalid_argument("--ctx-size: " + std::to_string(o.n_ctx) + " is too small (at least 4)");
  AUTOGLM_ASSIGN_OR_RETURN(const auto model, Model::load(model_path));
  AUTOGLM_ASSIGN_OR_RETURN(const auto tokenizer, model->load_tokenizer());
  std::string body = text;
  if (!body.empty() && body.back() == '\n') body.pop_back();
  const std::vector<int32_t> tokens = tokenizer->encode(body, true);
  if (int64_t(tokens.size()) < 2 * o.n_ctx)
    return invalid_argument("the text has " + std::to_string(tokens.size()) + " tokens: at least 2 x --ctx-size (" +
                            std::to_string(2 * o.n_ctx) + ") are needed");
  int64_t n_chunk = int64_t(tokens.size()) / o.n_ctx;
  if (o.max_chunks >= 0) n_chunk = std::min(n_chunk, o.max_chunks);
  const auto with_bos = tokenizer->encode("", true);
  ThreadPool pool(o.threads > 0 ? o.threads : physical_core_count());
  ModelRunner runner(*model, pool);
  ImatrixCollector collector(model->file(), o.process_output);
  runner.set_matmul_observer(collector);
  ImatrixRun run{*model, runner, o.n_ctx, with_bos.empty() ? -1 : with_bos.front(), {}};
  const auto start = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < n_chunk; ++c) {
    AUTOGLM_RETURN_IF_ERROR(run.chunk(tokens.data() + c * o.n_ctx));
    if (o.save_every > 0 && (c + 1) % o.save_every == 0 && c + 1 < n_chunk)
      AUTOGLM_RETURN_IF_ERROR(save(collector, c + 1, o, out));
    if (o.on_chunk)
      o.on_chunk(c + 1, n_chunk, run.nll.ppl().value,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  AUTOGLM_RETURN_IF_ERROR(save(collector, n_chunk, o, out));
  return ImatrixReport{n_chunk, int64_t(collector.result().entries.size()), run.nll.ppl().value};
}

}  // namespace autoglm
