#include "core/turn_queue.h"

namespace autoglm {

TurnQueue::Turn TurnQueue::take() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t ticket = next_ticket_++;
  next_.wait(lock, [&] { return serving_ == ticket; });
  return Turn(this);
}

void TurnQueue::release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++serving_;
  }
  next_.notify_all();
}

int64_t TurnQueue::waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return int64_t(next_ticket_ - serving_) - (next_ticket_ > serving_ ? 1 : 0);
}

}  // namespace autoglm
