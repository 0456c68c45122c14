// Drafting with a model: a cheaper draft model (another file, or the target's own weights in
// a smaller type) with its own KV cache, or the target's first layers (early exit), which
// write the target's own cache. Either proposes its most likely token, one pass per token.
#pragma once

#include <memory>

#include "engine/speculative.h"
#include "model/kv_cache.h"
#include "model/runner.h"

namespace autoglm {

class ModelDrafter final : public Drafter {
 public:
  // A draft model with a cache of n_ctx positions (kv_type must have passed kv_format).
  ModelDrafter(const Model& draft, ThreadPool& pool, int64_t n_ctx, DType kv_type, float p_min);
  // Early exit: the first exit_layer layers of `target`, then its final norm and head. They
  // write `target_cache`, where the target's passes have left every row but the last token's.
  ModelDrafter(const Model& target, ThreadPool& pool, KvCache& target_cache, int32_t exit_layer, float p_min);

  Status propose(const std::vector<int32_t>& history, int32_t max_tokens, std::vector<int32_t>& drafts) override;
  void reset() override { cached_.clear(); }
  OpProfile* profile() override { return &runner_.profile(); }

 private:
  // Runs the tokens of `history` the cache lacks; logits_ then follow its last token.
  Status catch_up(const std::vector<int32_t>& history);
  Status run(const int32_t* tokens, int64_t n, int32_t pos);
  // The most likely next token, or -1 when its probability is under p_min.
  int32_t confident_argmax() const;

  const ModelSpec& spec_;
  ModelRunner runner_;
  std::unique_ptr<ContiguousKvCache> own_cache_;
  KvCache* cache_;
  int32_t exit_layer_ = 0;
  float p_min_;
  std::vector<int32_t> cached_;  // own cache: the tokens whose rows it holds
  std::vector<float> logits_;
};

}  // namespace autoglm
