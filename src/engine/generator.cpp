#include "engine/generator.h"

#include <chrono>

#include "engine/constrained.h"
#include "engine/make_drafter.h"
#include "engine/prompt_check.h"
#include "engine/text_stream.h"
#include "sample/sampler.h"

namespace autoglm {
namespace {

constexpr int64_t kDraftBlock = 16;  // positions per block of the draft model's cache

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Generator::Generator(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool, int64_t n_ctx, DType kv_type)
    : model_(model),
      tokenizer_(tokenizer),
      trie_(tokenizer),
      pool_(pool),
      runner_(model, pool),
      cache_(model.spec(), n_ctx, kv_type, model.device()) {}

Status Generator::prefill(const std::vector<int32_t>& tokens, int32_t chunk, std::vector<float>& last_logits) {
  if (chunk <= 0) return invalid_argument("prefill chunk must be positive");
  for (size_t start = 0; start < tokens.size(); start += size_t(chunk)) {
    const size_t n = std::min(tokens.size() - start, size_t(chunk));
    Batch batch = one_sequence();
    batch.add_sequence_tokens(0, tokens.data() + start, int64_t(n), int32_t(start), start + n == tokens.size());
    AUTOGLM_RETURN_IF_ERROR(runner_.forward(batch, last_logits));
    AUTOGLM_RETURN_IF_ERROR(show_drafter(int64_t(start)));
  }
  return Status::ok();
}

Status Generator::show_drafter(int64_t first_pos) {
  if (!drafter_ || !drafter_->wants_target_hidden()) return Status::ok();
  AUTOGLM_RETURN_IF_ERROR(runner_.last_hidden(hidden_));
  drafter_->observe_target(0, first_pos, hidden_.data(), int64_t(hidden_.size()) / model_.spec().n_embd);
  return Status::ok();
}

Batch Generator::one_sequence() {
  Batch batch;
  batch.caches = {&cache_};
  if (active_lora_ && !active_lora_->empty()) batch.loras = {active_lora_};
  return batch;
}

Status Generator::set_speculation(const SpecConfig& config, const Model* draft) {
  drafter_.reset();
  // One sequence at a time: the draft model's pool holds one full context.
  const DraftPool draft_pool{(cache_.capacity() + kDraftBlock - 1) / kDraftBlock, kDraftBlock, cache_.format().type};
  AUTOGLM_ASSIGN_OR_RETURN(drafter_, make_drafter(config, model_, draft, pool_, draft_pool));
  spec_ = config;
  return Status::ok();
}

Status Generator::decode_pass(const std::vector<int32_t>& history, const std::vector<int32_t>& drafts,
                              std::vector<float>& logits) {
  std::vector<int32_t> tokens{history.back()};
  tokens.insert(tokens.end(), drafts.begin(), drafts.end());
  Batch batch = one_sequence();
  batch.add_sequence_tokens(0, tokens.data(), int64_t(tokens.size()), int32_t(history.size() - 1), true,
                            /*logits_for_all=*/true);
  AUTOGLM_RETURN_IF_ERROR(runner_.forward(batch, logits));
  return show_drafter(int64_t(history.size()) - 1);
}

Result<std::vector<float>> Generator::evaluate(const std::vector<int32_t>& tokens, bool all_positions) {
  if (tokens.empty()) return invalid_argument("no tokens to evaluate");
  if (int64_t(tokens.size()) > cache_.capacity())
    return out_of_range(std::to_string(tokens.size()) + " tokens do not fit the context of " +
                        std::to_string(cache_.capacity()));
  active_lora_ = lora_.get();
  Batch batch = one_sequence();
  batch.add_sequence_tokens(0, tokens.data(), int64_t(tokens.size()), 0, true, all_positions);
  std::vector<float> logits;
  AUTOGLM_RETURN_IF_ERROR(runner_.forward(batch, logits));
  return logits;
}

Result<GenerationResult> Generator::generate(const GenerationRequest& options,
                                             const std::function<bool(const std::string&)>& on_text,
                                             int32_t prefill_chunk) {
  const std::vector<int32_t>& prompt = options.prompt;
  active_lora_ = options.lora ? options.lora.get() : lora_.get();
  AUTOGLM_RETURN_IF_ERROR(validate_sampling_params(options.sampling));
  if (prompt.empty()) return invalid_argument("prompt: no tokens (empty prompt and no BOS)");
  if (options.max_tokens < 0) return invalid_argument("max_tokens must be >= 0");
  AUTOGLM_RETURN_IF_ERROR(check_prompt_fits(int64_t(prompt.size()), cache_.capacity()));

  GenerationResult result;
  result.prompt_tokens = int32_t(prompt.size());
  const int32_t n_vocab = int32_t(model_.spec().n_vocab);
  std::vector<float> logits;
  if (drafter_) drafter_->forget(0);  // the previous sequence's
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
  DraftLength draft_length(spec_.draft_max, spec_.draft_min, drafter_ ? drafter_->token_cost() : 0);
  std::vector<int32_t> drafts;
  // Row j of logits follows the j-th token of the last pass: sample each in order, as plain
  // decoding would, and go on to the next row while the sample equals the draft there.
  for (bool done = false; !done;) {
    const int32_t accepted =
        walk_verified_rows(int64_t(logits.size()) / n_vocab, drafts, [&](int64_t j) -> std::optional<int32_t> {
          int32_t token;
          {
            OpTimer timer(runner_.profile(), Op::kSampling);
            const int64_t budget = std::min<int64_t>(options.max_tokens - int64_t(result.tokens.size()),
                                                     cache_.capacity() - int64_t(history.size()));
            token = sample_next(sampler, matcher.get(), logits.data() + j * n_vocab, n_vocab, history, budget);
          }
          if (token < 0) {  // the grammar admits nothing more and there is no end token
            result.finish_reason = FinishReason::kStop;
            done = true;
            return std::nullopt;
          }
          result.tokens.push_back(token);
          history.push_back(token);
          if (result.spec.target_passes > 0) ++result.spec.emitted;
          if (!emit(stream.push(token))) done = true;
          if (stream.ended()) result.finish_reason = FinishReason::kStop, done = true;
          if (int64_t(result.tokens.size()) == options.max_tokens) done = true;
          if (done) return std::nullopt;
          return token;
        });
    result.spec.drafted += int64_t(drafts.size());  // none after the prefill
    result.spec.accepted += accepted;
    draft_length.record(int32_t(drafts.size()), accepted);
    if (done || int64_t(history.size()) > cache_.capacity()) break;  // context full: ends as "length"
    drafts.clear();
    const int64_t room = std::min<int64_t>(options.max_tokens - int64_t(result.tokens.size()) - 1,
                                           cache_.capacity() - int64_t(history.size()));
    const int32_t want = int32_t(std::min<int64_t>(draft_length.next(), room));
    if (drafter_ && want > 0) {
      DraftJob job;
      job.history = &history;
      job.max_tokens = want;
      job.target_cache = &cache_;
      job.catch_up_limit = catch_up_limit(options.max_tokens - int64_t(result.tokens.size()));
      const auto drafting = std::chrono::steady_clock::now();
      AUTOGLM_RETURN_IF_ERROR(drafter_->propose(std::span(&job, 1)));
      result.spec.draft_seconds += seconds_since(drafting);
      if (int32_t(job.drafts.size()) >= spec_.draft_min) drafts = std::move(job.drafts);
    }
    ++result.spec.target_passes;
    const auto verifying = std::chrono::steady_clock::now();
    AUTOGLM_RETURN_IF_ERROR(decode_pass(history, drafts, logits));
    result.spec.verify_seconds += seconds_since(verifying);
  }
  emit(stream.flush());
  result.decode_seconds = seconds_since(t0);
  return result;
}

}  // namespace autoglm
