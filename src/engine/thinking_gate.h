// A thinking model's reasoning phase as the engine samples it. Tokens inside the thinking are
// counted, and at the budget (thinking_budget_tokens) the close marker's tokens are forced. A
// constraint on the answer (response_format, a forced tool call) applies only once the thinking
// has closed; before it opens, the open marker's first token is allowed besides what the
// constraint admits, so a model that thinks first still can (its other tokens are then forced).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace autoglm {

struct ThinkingSpec {
  std::vector<int32_t> open, close;  // the markers' tokens ("<think>", "</think>")
  bool starts_inside = false;        // the prompt opened the thinking
  bool starts_closed = false;        // the prompt closed it (thinking switched off): the answer follows
  int32_t budget = -1;               // tokens of thinking before the close is forced; -1: no limit
  bool constraint_after = false;     // the request's grammar constrains the answer only
};

class ThinkingGate {
 public:
  // No spec: no thinking phase (a grammar, if any, constrains everything).
  explicit ThinkingGate(const std::optional<ThinkingSpec>& spec);

  // The next token when it is forced (the rest of a marker), else none: sample.
  std::optional<int32_t> forced() const;
  // Whether the request's grammar applies to the next sampled token.
  bool constrained() const { return phase_ != Phase::kThinking || !constraint_after_; }
  // A token a constrained sample may take besides what the grammar admits (-1: none): the open
  // marker's first, while the thinking may still open.
  int32_t also_allowed() const;
  // Whether the phase still waits for the first non-blank token (accept wants to know if a
  // token is blank only then).
  bool before_start() const { return phase_ == Phase::kBefore; }
  // The token emitted; `blank`: its text is whitespace (only read before the start).
  void accept(int32_t token, bool blank);
  bool thinking() const { return phase_ == Phase::kThinking; }

 private:
  enum class Phase { kBefore, kThinking, kAnswer };
  bool ends_with_close() const;

  Phase phase_ = Phase::kAnswer;
  std::vector<int32_t> open_, close_;
  int32_t budget_ = -1;
  bool constraint_after_ = false;
  size_t open_matched_ = 0;      // the open marker's tokens seen so far, before the start
  int64_t thought_ = 0;          // tokens sampled inside the thinking
  std::deque<int32_t> forced_;   // tokens to emit next without sampling
  std::vector<int32_t> recent_;  // the last tokens inside the thinking (the close's length)
};

}  // namespace autoglm
