// Turns, first come first served, for callers that share one thread pool: each engine step
// of each model holds a turn, so the forward passes of several models interleave step by step
// and none waits more than one step of each other (a long prefill runs in chunks, one per
// step). std::mutex promises no order: a thread that releases it may take it straight back.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace autoglm {

class TurnQueue {
 public:
  class Turn {
   public:
    Turn(Turn&& other) noexcept : queue_(other.queue_) { other.queue_ = nullptr; }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    Turn& operator=(Turn&&) = delete;
    ~Turn() {
      if (queue_) queue_->release();
    }

   private:
    friend class TurnQueue;
    explicit Turn(TurnQueue* queue) : queue_(queue) {}
    TurnQueue* queue_;
  };

  // Waits until every earlier caller has had its turn and released it.
  Turn take();
  // Callers waiting for a turn now (not counting the one holding it).
  int64_t waiting() const;

 private:
  void release();

  mutable std::mutex mutex_;
  std::condition_variable next_;
  uint64_t next_ticket_ = 0;  // handed to the next caller
  uint64_t serving_ = 0;      // the ticket whose turn it is
};

}  // namespace autoglm
