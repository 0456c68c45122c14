// The cascade's decision between a light and a heavy model, as one stream of events. The
// light model's events are held back until its first `tokens` tokens are in (or it ends);
// their confidence (the mean or the least top-1 probability) decides: at or above the
// threshold they go out and the light model goes on; below it, the light request is
// cancelled, the heavy one submitted, and only the heavy model's events go out. Runs on the
// engines' threads (their stream notifications): no thread of its own.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "autoglm/engine.h"
#include "autoglm/status.h"
#include "server/routing/routing.h"

namespace autoglm {

struct CascadeDecision {
  bool escalated = false;
  double confidence = 1;
  int32_t tokens_seen = 0;
  std::string reason;  // "confidence 0.42 < 0.5 over 8 tokens: escalated"
};

class CascadeStream : public std::enable_shared_from_this<CascadeStream> {
 public:
  using SubmitHeavy = std::function<Result<std::shared_ptr<StreamHandle>>()>;
  // Called once, on an engine thread, before any event goes out.
  using OnDecided = std::function<void(const CascadeDecision&)>;

  // `light` was submitted with at least one top logprob; `top_logprobs` is what the client
  // asked for (-1: none), what the events going out carry.
  static std::shared_ptr<CascadeStream> start(std::shared_ptr<StreamHandle> light, const CascadeRoute& route,
                                              int32_t top_logprobs, SubmitHeavy submit_heavy, OnDecided on_decided);

  // The events that reach the client; cancelling it cancels the model answering.
  std::shared_ptr<StreamHandle> output() const { return out_; }

 private:
  CascadeStream(std::shared_ptr<StreamHandle> light, const CascadeRoute& route, int32_t top_logprobs,
                SubmitHeavy submit_heavy, OnDecided on_decided);
  void pump_light();
  void pump_heavy();
  void pump_heavy_locked();
  void observe(const StreamEvent& ev);
  void decide(bool light_failed);
  void send(StreamEvent ev);
  void propagate_cancel();

  std::mutex mutex_;
  std::shared_ptr<StreamHandle> light_, heavy_, out_;
  StreamHandle::Append append_;  // to out_
  CascadeRoute route_;
  int32_t top_logprobs_;
  SubmitHeavy submit_heavy_;
  OnDecided on_decided_;
  std::vector<StreamEvent> held_;
  bool decided_ = false;
  CascadeDecision decision_;
  double sum_ = 0, min_ = 1;
};

}  // namespace autoglm
