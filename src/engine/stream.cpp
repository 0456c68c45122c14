#include "engine/stream.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>

namespace autoglm {

struct StreamHandle::State {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<StreamEvent> events;
  std::function<void()> notify;
  std::atomic<bool> cancelled{false};
  // Run on each event as the reader takes it (events are taken in order, by one reader at a
  // time), so parsing a reply's calls costs the engine thread nothing.
  EventShaper shaper;
};

StreamHandle::StreamHandle(std::unique_ptr<State> state) : state_(std::move(state)) {}
StreamHandle::~StreamHandle() = default;

bool StreamHandle::next(StreamEvent& event, std::chrono::milliseconds timeout) {
  {
    std::unique_lock<std::mutex> lock(state_->mutex);
    if (!state_->ready.wait_for(lock, timeout, [this] { return !state_->events.empty(); })) return false;
    event = std::move(state_->events.front());
    state_->events.pop_front();
  }
  if (state_->shaper) state_->shaper(event);
  return true;
}

bool StreamHandle::try_next(StreamEvent& event) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->events.empty()) return false;
    event = std::move(state_->events.front());
    state_->events.pop_front();
  }
  if (state_->shaper) state_->shaper(event);
  return true;
}

void StreamHandle::set_notify(std::function<void()> notify) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->notify = std::move(notify);
}

void StreamHandle::cancel() {
  state_->cancelled = true;
}

bool StreamHandle::cancelled() const {
  return state_->cancelled;
}

void plain_text_parts(StreamEvent& event) {
  if (!event.text.empty()) event.parts.push_back({PartKind::kText, event.text, 0});
}

std::shared_ptr<StreamHandle> StreamHandle::recorded(const std::vector<StreamEvent>& events) {
  return StreamWriter::replay(events);
}

std::pair<std::shared_ptr<StreamHandle>, StreamHandle::Append> StreamHandle::relay() {
  std::shared_ptr<StreamHandle> handle = StreamWriter::open();
  Append append = [weak = std::weak_ptr<StreamHandle>(handle)](StreamEvent event) {
    if (auto h = weak.lock()) StreamWriter::push(*h, std::move(event));  // no reader left: dropped
  };
  return {std::move(handle), std::move(append)};
}

std::shared_ptr<StreamHandle> StreamWriter::open(EventShaper shaper) {
  auto state = std::make_unique<StreamHandle::State>();
  state->shaper = std::move(shaper);
  return std::shared_ptr<StreamHandle>(new StreamHandle(std::move(state)));
}

std::shared_ptr<StreamHandle> StreamWriter::replay(const std::vector<StreamEvent>& events) {
  auto handle = open();
  for (const StreamEvent& ev : events) push(*handle, ev);
  return handle;
}

void StreamWriter::push(StreamHandle& handle, StreamEvent event) {
  StreamHandle::State& s = *handle.state_;
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.events.push_back(std::move(event));
    notify = s.notify;
  }
  s.ready.notify_one();
  if (notify) notify();
}

}  // namespace autoglm
