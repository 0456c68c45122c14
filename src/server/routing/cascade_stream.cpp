#include "server/routing/cascade_stream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

namespace autoglm {

CascadeStream::CascadeStream(std::shared_ptr<StreamHandle> light, const CascadeRoute& route, int32_t top_logprobs,
                             SubmitHeavy submit_heavy, OnDecided on_decided)
    : light_(std::move(light)),
      route_(route),
      top_logprobs_(top_logprobs),
      submit_heavy_(std::move(submit_heavy)),
      on_decided_(std::move(on_decided)) {
  std::tie(out_, append_) = StreamHandle::relay();
}

std::shared_ptr<CascadeStream> CascadeStream::start(std::shared_ptr<StreamHandle> light, const CascadeRoute& route,
                                                    int32_t top_logprobs, SubmitHeavy submit_heavy,
                                                    OnDecided on_decided) {
  std::shared_ptr<CascadeStream> cascade(
      new CascadeStream(std::move(light), route, top_logprobs, std::move(submit_heavy), std::move(on_decided)));
  // The handles hold the cascade through their notifiers, for as long as events may come.
  cascade->light_->set_notify([cascade] { cascade->pump_light(); });
  cascade->pump_light();  // events that came before the notifier
  return cascade;
}

void CascadeStream::propagate_cancel() {
  if (!out_->cancelled()) return;
  light_->cancel();
  if (heavy_) heavy_->cancel();
}

void CascadeStream::pump_light() {
  std::lock_guard<std::mutex> lock(mutex_);
  propagate_cancel();
  StreamEvent ev;
  while (light_->try_next(ev)) {
    // The notifier holds this cascade: let go once the light request is over.
    if (ev.finished) light_->set_notify(nullptr);
    if (decided_) {
      if (decision_.escalated) continue;  // the cancelled light request's last events
      send(std::move(ev));
      continue;
    }
    observe(ev);
    const bool finished = ev.finished;
    const bool failed = finished && ev.finish_reason == FinishReason::kError;
    held_.push_back(std::move(ev));
    if (finished || decision_.tokens_seen >= route_.tokens) decide(failed);
  }
}

void CascadeStream::observe(const StreamEvent& ev) {
  for (const TokenLogprob& lp : ev.logprobs) {
    if (decision_.tokens_seen >= route_.tokens) break;
    const float top1 = lp.top.empty() ? lp.logprob : lp.top.front().second;
    const double p = std::exp(double(top1));
    sum_ += p;
    min_ = std::min(min_, p);
    ++decision_.tokens_seen;
  }
}

void CascadeStream::decide(bool light_failed) {
  decided_ = true;
  const int32_t n = decision_.tokens_seen;
  decision_.confidence = n == 0 ? 1.0 : route_.measure == ConfidenceMeasure::kMean ? sum_ / n : min_;
  decision_.escalated = light_failed || decision_.confidence < route_.threshold;
  char words[160];
  if (light_failed)
    std::snprintf(words, sizeof(words), "the light model failed: escalated");
  else
    std::snprintf(words, sizeof(words), "%s confidence %.3f %s %.3f over %d tokens: %s",
                  route_.measure == ConfidenceMeasure::kMean ? "mean" : "min", decision_.confidence,
                  decision_.escalated ? "<" : ">=", route_.threshold, n, decision_.escalated ? "escalated" : "kept");
  decision_.reason = words;
  if (on_decided_) on_decided_(decision_);
  if (!decision_.escalated) {
    for (StreamEvent& held : held_) send(std::move(held));
    held_.clear();
    return;
  }
  held_.clear();
  light_->cancel();
  auto heavy = submit_heavy_();
  if (!heavy) {
    StreamEvent failure;
    failure.finished = true;
    failure.finish_reason = FinishReason::kError;
    failure.error = "the cascade's heavy model: " + heavy.status().message();
    return send(std::move(failure));
  }
  heavy_ = *heavy;
  heavy_->set_notify([self = shared_from_this()] { self->pump_heavy(); });
  pump_heavy_locked();
}

void CascadeStream::pump_heavy() {
  std::lock_guard<std::mutex> lock(mutex_);
  pump_heavy_locked();
}

void CascadeStream::pump_heavy_locked() {
  propagate_cancel();
  StreamEvent ev;
  while (heavy_->try_next(ev)) {
    if (ev.finished) heavy_->set_notify(nullptr);
    send(std::move(ev));
  }
}

// An event as the client asked for it: the logprobs it wanted (the light request was given
// one alternative to measure its confidence).
void CascadeStream::send(StreamEvent ev) {
  if (top_logprobs_ < 0) {
    ev.logprobs.clear();
  } else {
    for (TokenLogprob& lp : ev.logprobs)
      if (int32_t(lp.top.size()) > top_logprobs_) lp.top.resize(size_t(top_logprobs_));
  }
  append_(std::move(ev));
}

}  // namespace autoglm
