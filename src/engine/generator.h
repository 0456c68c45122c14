// Generation of one sequence at a time: prefill in chunks, then decode token by
// token through the sampler, streaming UTF-8-safe text and honouring stop strings.
// `run`, `bench` and the tests use it; the serving engine batches many sequences.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autoglm/engine.h"
#include "autoglm/sampling_params.h"
#include "autoglm/status.h"
#include "core/thread_pool.h"
#include "engine/constrained.h"
#include "engine/request.h"
#include "engine/speculative.h"
#include "model/model.h"
#include "model/runner.h"
#include "sample/grammar.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {

struct GenerationResult {
  std::vector<int32_t> tokens;                       // generated ids (an EOS that ended generation included)
  std::string text;                                  // generated text, stop string excluded
  FinishReason finish_reason = FinishReason::kNone;  // kStop (EOS, stop string) or kLength
  int32_t prompt_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  SpecStats spec;  // the decode passes and, with speculation, what was drafted and kept
};

class Generator {
 public:
  // kv_type must have passed kv_format for the model.
  Generator(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool, int64_t n_ctx,
            DType kv_type = DType::F16);

  // The serving engine's request, run alone (priority, deadline and logprobs do not apply);
  // on_text receives each piece of text as it becomes final; returning false cancels.
  // prefill_chunk: tokens per forward pass of the prompt.
  Result<GenerationResult> generate(const GenerationRequest& request,
                                    const std::function<bool(const std::string&)>& on_text = {},
                                    int32_t prefill_chunk = 512);

  // Speculative decoding for the following generate calls (SpecMethod::kNone turns it off).
  // kDraft needs `draft`, a model with the target's vocabulary (load_draft_model), which must
  // outlive the generator. Errors name the option.
  Status set_speculation(const SpecConfig& config, const Model* draft = nullptr);

  // Evaluates tokens from position 0 of an empty cache in one pass; logits of every
  // position ([n][n_vocab]) or of the last one.
  Result<std::vector<float>> evaluate(const std::vector<int32_t>& tokens, bool all_positions);

  // LoRA adapters for evaluate and for generate calls whose request names none (null: none).
  void set_lora(std::shared_ptr<const LoraSet> lora) { lora_ = std::move(lora); }

  int64_t n_ctx() const { return cache_.capacity(); }
  // The rows the last generate left behind (the tests compare them).
  KvCache& kv_cache() { return cache_; }
  OpProfile& profile() { return runner_.profile(); }
  // The drafter's passes, when it runs a model (null otherwise).
  OpProfile* draft_profile() { return drafter_ ? drafter_->profile() : nullptr; }

 private:
  Status prefill(const std::vector<int32_t>& tokens, int32_t chunk, std::vector<float>& last_logits);
  // One decode pass: the last token of history (sampled, not yet in the cache) and the
  // drafts after it; logits gets a row per token.
  Status decode_pass(const std::vector<int32_t>& history, const std::vector<int32_t>& drafts,
                     std::vector<float>& logits);
  // Hands a drafter that reads the target's hidden states (MTP) those of the pass just run,
  // whose first token was at first_pos.
  Status show_drafter(int64_t first_pos);

  const Model& model_;
  const Tokenizer& tokenizer_;
  VocabularyTrie trie_;  // for requests with a grammar
  ThreadPool& pool_;
  ModelRunner runner_;
  ContiguousKvCache cache_;
  SpecConfig spec_;
  std::unique_ptr<Drafter> drafter_;  // null: plain decoding
  std::vector<float> hidden_;         // the last pass's hidden rows, for the drafter
  std::shared_ptr<const LoraSet> lora_;
  const LoraSet* active_lora_ = nullptr;  // of the pass being run
  Batch one_sequence();                   // a batch of cache_, under the active adapters
};

}  // namespace autoglm
