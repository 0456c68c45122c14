#include "engine/generator.h"

#include <chrono>

#include "engine/constrained.h"
#include "engine/prompt_check.h"
#include "engine/text_stream.h"
#include "sample/sampler.h"

namespace autoglm {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Generator::Generator(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool, int64_t n_ctx, DType kv_type)
    : model_(model),
      tokenizer_(tokenizer),
      trie_(tokenizer),
      runner_(model, pool),
      cache_(model.spec(), n_ctx, kv_type) {}

Status Generator::prefill(const std::vector<int32_t>& tokens, int32_t chunk, std::vector<float>& last_logits) {
  if (chunk <= 0) return invalid_argument("prefill chunk must be positive");
  for (size_t start = 0; start < tokens.size(); start += size_t(chunk)) {
    const size_t n = std::min(tokens.size() - start, size_t(chunk));
    Batch batch;
    batch.caches = {&cache_};
    batch.add_sequence_tokens(0, tokens.data() + start, int64_t(n), int32_t(start), start + n == tokens.size());
    AUTOGLM_RETURN_IF_ERROR(runner_.forward(batch, last_logits));
  }
  return Status::ok();
}

Result<std::vector<float>> Generator::evaluate(const std::vector<int32_t>& tokens, bool all_positions) {
  if (tokens.empty()) return invalid_argument("no tokens to evaluate");
  if (int64_t(tokens.size()) > cache_.capacity())
    return out_of_range(std::to_string(tokens.size()) + " tokens do not fit the context of " +
                        std::to_string(cache_.capacity()));
  Batch batch;
  batch.caches = {&cache_};
  batch.add_sequence_tokens(0, tokens.data(), int64_t(tokens.size()), 0, true, all_positions);
  std::vector<float> logits;
  AUTOGLM_RETURN_IF_ERROR(runner_.forward(batch, logits));
  return logits;
}

Result<GenerationResult> Generator::generate(const GenerationRequest& options,
                                             const std::function<bool(const std::string&)>& on_text,
                                             int32_t prefill_chunk) {
  const std::vector<int32_t>& prompt = options.prompt;
  AUTOGLM_RETURN_IF_ERROR(validate_sampling_params(options.sampling));
  if (prompt.empty()) return invalid_argument("prompt: no tokens (empty prompt and no BOS)");
  if (options.max_tokens < 0) return invalid_argument("max_tokens must be >= 0");
  AUTOGLM_RETURN_IF_ERROR(check_prompt_fits(int64_t(prompt.size()), cache_.capacity()));

  GenerationResult result;
  result.prompt_tokens = int32_t(prompt.size());
  const int32_t n_vocab = int32_t(model_.spec().n_vocab);
  std::vector<float> logits;
  auto t0 = std::chrono::steady_clock::now();
  AUTOGLM_RETURN_IF_ERROR(prefill(prompt, prefill_chunk, logits));
  result.prefill_seconds = seconds_since(t0);

  Sampler sampler(options.sampling);
  auto matcher = trie_.make_matcher(options.grammar);
  TextStream stream(tokenizer_, options.stop, /*stop_at_eog=*/!options.ignore_eos);
  std::vector<int32_t> history = prompt;
  auto emit = [&](const std::string& text) {
    result.text += text;
    return text.empty() || !on_text || on_text(text);
  };
  result.finish_reason = FinishReason::kLength;
  t0 = std::chrono::steady_clock::now();
  int32_t pos = int32_t(prompt.size());
  for (int32_t step = 0; step < options.max_tokens; ++step) {
    int32_t token;
    {
      OpTimer timer(runner_.profile(), Op::kSampling);
      const int64_t budget = std::min<int64_t>(options.max_tokens - step, cache_.capacity() - pos);
      token = sample_next(sampler, matcher.get(), logits.data(), n_vocab, history, budget);
    }
    if (token < 0) {  // the grammar admits nothing more and there is no end token
      result.finish_reason = FinishReason::kStop;
      break;
    }
    result.tokens.push_back(token);
    history.push_back(token);
    if (!emit(stream.push(token))) break;
    if (stream.ended()) {
      result.finish_reason = FinishReason::kStop;
      break;
    }
    if (step + 1 == options.max_tokens) break;
    if (pos >= cache_.capacity()) break;  // context full: ends as "length"
    Batch batch;
    batch.caches = {&cache_};
    batch.add_sequence_tokens(0, &token, 1, pos++, true);
    AUTOGLM_RETURN_IF_ERROR(runner_.forward(batch, logits));
  }
  emit(stream.flush());
  result.decode_seconds = seconds_since(t0);
  return result;
}

}  // namespace autoglm
