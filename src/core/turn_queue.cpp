#include "core/turn_queue.h"

#include <limits>

namespace autoglm {

TurnQueue::Seat::Seat(TurnQueue& queue) : queue_(queue), id_(queue.add_seat()) {}

TurnQueue::Seat::~Seat() {
  queue_.remove_seat(id_);
}

TurnQueue::Turn TurnQueue::Seat::take() {
  return queue_.take(id_);
}

void TurnQueue::Seat::idle() {
  queue_.set_idle(id_);
}

void TurnQueue::set_idle(uint64_t seat) {
  std::lock_guard<std::mutex> lock(mutex_);
  seats_.at(seat).idle = true;
}

uint64_t TurnQueue::add_seat() {
  std::lock_guard<std::mutex> lock(mutex_);
  seats_[next_seat_] = SeatState{};
  return next_seat_++;
}

void TurnQueue::remove_seat(uint64_t seat) {
  std::lock_guard<std::mutex> lock(mutex_);
  seats_.erase(seat);
}

bool TurnQueue::is_next(uint64_t seat) const {
  if (held_) return false;
  const SeatState& me = seats_.at(seat);
  for (const auto& [id, other] : seats_) {
    if (id == seat || !other.waiting) continue;
    if (other.held_seconds < me.held_seconds || (other.held_seconds == me.held_seconds && other.asked < me.asked))
      return false;
  }
  return true;
}

TurnQueue::Turn TurnQueue::take(uint64_t seat) {
  std::unique_lock<std::mutex> lock(mutex_);
  SeatState& me = seats_.at(seat);
  if (me.idle) {  // new or back from idling: no less than the seats in use have held (no banked credit)
    // In use: every seat not idle, also one between two turns (an engine sampling between steps,
    // which holds no turn and waits for none): counting only the waiting and the holder let a new
    // seat that asked in such a gap (an image's encoder) start from zero and keep the turn until
    // it had held as long as the engine ever had.
    double least_in_use = std::numeric_limits<double>::infinity();
    for (const auto& [id, other] : seats_)
      if (id != seat && !other.idle) least_in_use = std::min(least_in_use, other.held_seconds);
    if (least_in_use != std::numeric_limits<double>::infinity())
      me.held_seconds = std::max(me.held_seconds, least_in_use);
    me.idle = false;
  }
  me.waiting = true;
  me.asked = next_ask_++;
  changed_.wait(lock, [&] { return is_next(seat); });
  me.waiting = false;
  held_ = true;
  holder_ = seat;
  return Turn(this, seat);
}

void TurnQueue::release(uint64_t seat, std::chrono::steady_clock::time_point started) {
  const double held = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = seats_.find(seat); it != seats_.end()) it->second.held_seconds += held;
    held_ = false;
  }
  changed_.notify_all();
}

void TurnQueue::yield(uint64_t seat, std::chrono::steady_clock::time_point& started) {
  const auto now = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  SeatState& me = seats_.at(seat);
  me.held_seconds += std::chrono::duration<double>(now - started).count();
  started = now;
  bool someone_owed = false;  // a waiting seat that has held turns less (ties go to the waiter)
  for (const auto& [id, other] : seats_)
    someone_owed = someone_owed || (id != seat && other.waiting && other.held_seconds <= me.held_seconds);
  if (!someone_owed) return;
  held_ = false;
  me.waiting = true;
  me.asked = next_ask_++;
  changed_.notify_all();
  changed_.wait(lock, [&] { return is_next(seat); });
  me.waiting = false;
  held_ = true;
  holder_ = seat;
  started = std::chrono::steady_clock::now();
}

int64_t TurnQueue::waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t n = 0;
  for (const auto& [id, s] : seats_) n += s.waiting;
  return n;
}

}  // namespace autoglm
