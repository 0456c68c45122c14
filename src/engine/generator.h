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

  // Evaluates tokens from position 0 of an empty cache in one pass; logits of every
  // position ([n][n_vocab]) or of the last one.
  Result<std::vector<float>> evaluate(const std::vector<int32_t>& tokens, bool all_positions);

  int64_t n_ctx() const { return cache_.capacity(); }
  OpProfile& profile() { return runner_.profile(); }

 private:
  Status prefill(const std::vector<int32_t>& tokens, int32_t chunk, std::vector<float>& last_logits);

  const Model& model_;
  const Tokenizer& tokenizer_;
  VocabularyTrie trie_;  // for requests with a grammar
  ModelRunner runner_;
  ContiguousKvCache cache_;
};

}  // namespace autoglm
