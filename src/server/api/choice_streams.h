// The `n` choices of one generation request as one source of events. Choice 0 is submitted
// at once; the others once choice 0 has its first token, when the prompt's KV is in the
// prefix cache: they reuse it, so the prompt is prefilled once (cached_tokens says so).
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "autoglm/engine.h"
#include "autoglm/status.h"

namespace autoglm {

class ChoiceStreams {
 public:
  // Submits choice `index` (1..n-1); an error ends that choice with it.
  using Submit = std::function<Result<std::shared_ptr<StreamHandle>>(size_t index)>;

  ChoiceStreams(std::shared_ptr<StreamHandle> first, size_t n, Submit submit);

  // Called (on an engine thread) after each new event of any choice.
  void set_notify(std::function<void()> notify);
  // The next event of some choice, without waiting; `index` says which.
  bool try_next(StreamEvent& event, size_t& index);
  void cancel();
  size_t size() const { return n_; }

 private:
  void submit_the_rest(const StreamEvent& first);

  size_t n_;
  Submit submit_;
  std::vector<std::shared_ptr<StreamHandle>> handles_;  // those submitted
  std::vector<size_t> choice_of_;                       // the choice of each handle
  std::vector<std::pair<size_t, StreamEvent>> failed_;  // choices that could not start, to report
  std::function<void()> notify_;
  bool first_token_seen_ = false;
  bool cancelled_ = false;
  size_t next_ = 0;  // round robin over the choices
};

}  // namespace autoglm
