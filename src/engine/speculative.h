// Speculative decoding: a drafter proposes the next few tokens and the target model checks
// them all in one pass. Drafts are deterministic (the drafter's most likely token), so the
// standard rejection rule (accept with min(1, p/q), else resample from the normalised
// residual) with a one-hot q reduces to: sample the target's token at each position as plain
// decoding would, and keep the draft while they agree. Each emitted token costs the sampler
// exactly one draw on the same logits, so the output is that of plain decoding, token for
// token, with any sampling settings and seed (the forward pass is batch invariant).
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "autoglm/settings.h"
#include "autoglm/status.h"
#include "core/thread_pool.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/op_profile.h"
#include "tokenizer/vocab.h"

namespace autoglm {

// SpecMethod and its one parse (spec_method_from_name, spec_method_name) are public:
// autoglm/settings.h.

struct SpecConfig {
  SpecMethod method = SpecMethod::kNone;
  int32_t draft_max = 8;   // most tokens drafted per target pass
  int32_t draft_min = 0;   // fewer drafted than this: a plain decode step instead
  float p_min = 0.0f;      // drafting stops where the drafter's confidence falls below this
  int32_t exit_layer = 0;  // early exit: the layers that draft (0: a quarter of the model)
  int32_t ngram_max = 4;   // n-gram lookup: the longest suffix matched
  int32_t ngram_min = 1;   // ...and the shortest
  // A draft model of the target's KV shape drafts in the target's cache (make_drafter.h);
  // false: in a cache of its own, as a draft of another shape does.
  bool share_target_cache = true;
};

// Range checks; the message names the option.
Status validate_spec_config(const SpecConfig& c, int64_t n_layer);

// What a sequence's speculation did.
struct SpecStats {
  int64_t drafted = 0;        // tokens proposed
  int64_t accepted = 0;       // proposals the target agreed with
  int64_t target_passes = 0;  // forward passes of the target while decoding
  int64_t emitted = 0;        // tokens those passes produced
  double draft_seconds = 0;   // proposing (the drafter's passes and its cache catching up)
  double verify_seconds = 0;  // the target's passes over the pending token and the drafts
  double acceptance() const { return drafted > 0 ? double(accepted) / double(drafted) : 0.0; }
  void record_pass(int64_t n_drafted, int64_t n_accepted) {
    drafted += n_drafted;
    accepted += n_accepted;
    ++target_passes;
  }
  double tokens_per_pass() const { return target_passes > 0 ? double(emitted) / double(target_passes) : 0.0; }
};

// A draft model must speak the target's vocabulary: same size, same piece for every id,
// same BOS and EOS. The error names the first difference.
Status check_same_vocabulary(const Vocab& target, const Vocab& draft);
// Where a draft model comes from: a file or folder, or (path empty) the target's own weights;
// either re-encoded at load when `quantize` names a weight type. "auto" measures which of
// q8_0, q4_k and q4_0 decodes fastest on `pool`'s threads (a self-draft only among types
// smaller than the target's own) and logs the figures.
struct DraftSource {
  std::string path;
  std::string quantize;
  ThreadPool* pool = nullptr;                       // for "auto"
  std::optional<DType> target_type = std::nullopt;  // for "auto": the target's weights' type
};
// The type "auto" stands for, measured on `pool`; `target_type` is the target's weights' type
// when the draft is the target's own weights (an error when no candidate is smaller).
Result<DType> auto_draft_type(ThreadPool& pool, std::optional<DType> target_type);
// Loads a draft model and checks its vocabulary against the target's; errors name the option
// or start with "draft model".
Result<std::unique_ptr<Model>> load_draft_model(const DraftSource& source, const std::string& target_path,
                                                const Vocab& target);

// The rows of a verifying pass, in order: row j follows the pass's j-th token (the pending one,
// then the drafts). emit(j) samples the target's token from row j exactly as plain decoding
// would and streams it; it returns the token, or nullopt once the sequence has ended. The walk
// moves to row j + 1 only while that token equals drafts[j]. Returns the drafts accepted.
template <class Emit>
int32_t walk_verified_rows(int64_t n_rows, const std::vector<int32_t>& drafts, Emit emit) {
  int32_t accepted = 0;
  for (int64_t j = 0; j < n_rows; ++j) {
    const std::optional<int32_t> token = emit(j);
    if (!token || j >= int64_t(drafts.size()) || *token != drafts[size_t(j)]) break;
    ++accepted;
  }
  return accepted;
}

// One sequence's request for drafts.
struct DraftJob {
  uint64_t sequence = 0;                          // the drafter's key for what it keeps of the sequence
  const std::vector<int32_t>* history = nullptr;  // prompt and output so far; its last token runs next
  int32_t max_tokens = 0;
  // Early exit: the sequence's own cache, where the target has written every row of history
  // but the last token's, with room for history.size() - 1 + max_tokens positions.
  KvCache* target_cache = nullptr;
  // A model drafter whose cache lacks more of the history than this drafts nothing (catching up
  // would cost more than drafting saves): see catch_up_limit().
  int64_t catch_up_limit = INT64_MAX;
  std::vector<int32_t> drafts;  // out: up to max_tokens, fewer or none where the drafter is unsure
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Drafts for every job (a model drafter runs them as one batch per drafted position).
  virtual Status propose(std::span<DraftJob> jobs) = 0;
  // The sequence ended (or lost its cache): what the drafter keeps of it goes.
  virtual void forget(uint64_t /*sequence*/) {}
  // The per-op times of a drafter that runs a model (null for the others).
  virtual OpProfile* profile() { return nullptr; }
  // A drafter that reads the target's hidden states (MTP) gets, after every target pass over a
  // sequence, the rows ModelRunner::last_hidden gives for its tokens: n rows of n_embd floats,
  // positions first_pos.. (a prompt chunk, or the pending token and the drafts verified).
  virtual bool wants_target_hidden() const { return false; }
  virtual void observe_target(uint64_t /*sequence*/, int64_t /*first_pos*/, const float* /*rows*/, int64_t /*n*/) {}
  // What drafting one token costs against a decode step of the target (make_drafter sets it: a
  // draft model's weight bytes over the target's, early exit its share of the layers; 0 for a
  // lookup). DraftLength weighs it against the acceptance.
  double token_cost() const { return token_cost_; }
  void set_token_cost(double cost) { token_cost_ = cost; }

 private:
  double token_cost_ = 0;
};

// The most tokens a draft cache may catch up for a sequence with `remaining` tokens left to
// generate. A token caught up costs a prefill token of the draft model, several times cheaper
// than a decode step; a token generated with drafts saves a fraction of a decode step: twice
// what is left is about break-even (a long prompt is not worth a draft's prefill for a short
// answer). A short catch-up, about a pass, is always worth it.
inline int64_t catch_up_limit(int64_t remaining) {
  return std::max<int64_t>(2 * remaining, 64);
}

// The layers that draft in early exit: the configured count, or a quarter of the model.
int32_t early_exit_layers(const SpecConfig& c, int64_t n_layer);

// MTP drafts with the model's NextN block: an error naming `model` where it has none
// (n_nextn NextN layers declared, `bound` of them with tensors).
Status check_mtp_layers(const std::string& model, int64_t n_nextn, int64_t bound);

// How many tokens to draft next. Each pass drafts the length k (1 to draft-max) that gives the
// most tokens per unit of cost: with each draft kept with probability p, a pass emits
// (1 - p^(k+1)) / (1 - p) tokens on average and costs 1 + (c + kVerifyTokenCost) k decode
// steps, c being what drafting one token costs (the drafter's token_cost: a draft model's
// weight bytes over the target's, since decode steps stream the weights). p is the acceptance
// seen so far (each kept draft a success, the first rejected one a failure), older passes
// fading, so one unlucky pass of a good drafter changes little. Where not even one token pays
// (p below its cost), drafting goes off for a while (longer each time that repeats), then
// tries one token.
class DraftLength {
 public:
  DraftLength(int32_t max_len, int32_t min_len, double token_cost = 0);
  int32_t next() const;
  void record(int32_t drafted, int32_t accepted);
  // The faded per-token acceptance p.
  double acceptance() const { return kept_ / (kept_ + rejected_); }
  // What each token more adds to the target's verifying pass, in decode steps (a pass of 8
  // tokens took 1.5-2.4 plain steps of an F16 1B model on 2 Zen 5 cores).
  static constexpr double kVerifyTokenCost = 0.1;

 private:
  // Expected tokens per decode step's worth of cost when drafting k.
  double yield(int32_t k) const;
  int32_t max_len_, min_len_;
  double token_cost_;
  double kept_, rejected_;  // faded counts of kept and rejected drafts
  int32_t off_passes_ = 0;  // passes left without drafting
  int32_t backoff_;         // the next off period
};

}  // namespace autoglm
