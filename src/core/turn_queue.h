// Turns for callers that share one thread pool (the engines of several models): each engine
// step holds a turn, so the forward passes of the models never interleave kernel by kernel.
// Fair by time, as a CPU scheduler is: when a turn ends, the waiting seat that has held turns
// the least time goes next (ties: the one that asked first), so a small model's short steps
// are not paced by a large model's long ones, and a long prompt of one (prefilled in chunks,
// one per step) holds the others back by one step at most. A seat that says it went idle
// comes back at the least time of the seats in use: idling banks no credit.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>

namespace autoglm {

class TurnQueue {
 public:
  class Turn;

  // One caller's place in the queue (an engine keeps one for its life).
  class Seat {
   public:
    explicit Seat(TurnQueue& queue);
    ~Seat();
    Seat(const Seat&) = delete;
    Seat& operator=(const Seat&) = delete;
    // Waits until this seat's turn; the turn ends when the returned Turn goes.
    Turn take();
    // No turns wanted for a while (an engine with nothing to do): the next take starts from
    // the least time of the seats in use rather than from this seat's own.
    void idle();

   private:
    friend class TurnQueue;
    TurnQueue& queue_;
    uint64_t id_;
  };

  class Turn {
   public:
    Turn(Turn&& other) noexcept : queue_(other.queue_), seat_(other.seat_), started_(other.started_) {
      other.queue_ = nullptr;
    }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    Turn& operator=(Turn&&) = delete;
    ~Turn() {
      if (queue_) queue_->release(seat_, started_);
    }
    // Between two units of work: keeps the turn while this seat has held turns no longer than
    // every seat waiting; else hands it to the one that has held least and waits for its
    // next turn. (Releasing and taking again would lose the turn to any waiter: a waiting
    // seat is granted the turn before this one asks again.)
    void yield() { queue_->yield(seat_, started_); }

   private:
    friend class TurnQueue;
    Turn(TurnQueue* queue, uint64_t seat) : queue_(queue), seat_(seat), started_(std::chrono::steady_clock::now()) {}
    TurnQueue* queue_;
    uint64_t seat_;
    std::chrono::steady_clock::time_point started_;
  };

  // Seats waiting for a turn now (not counting the one holding it).
  int64_t waiting() const;

 private:
  struct SeatState {
    double held_seconds = 0;  // turns held so far (raised on coming back from idle: see above)
    bool waiting = false;
    bool idle = true;
    uint64_t asked = 0;  // when it asked, for ties
  };
  uint64_t add_seat();
  void remove_seat(uint64_t seat);
  void set_idle(uint64_t seat);
  Turn take(uint64_t seat);
  void release(uint64_t seat, std::chrono::steady_clock::time_point started);
  void yield(uint64_t seat, std::chrono::steady_clock::time_point& started);
  bool is_next(uint64_t seat) const;  // under mutex_

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<uint64_t, SeatState> seats_;
  uint64_t next_seat_ = 0, next_ask_ = 0;
  bool held_ = false;
  uint64_t holder_ = 0;
};

}  // namespace autoglm
