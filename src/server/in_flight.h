// The generations whose replies are not done: counted for the drain (in_flight) and cancelled
// all at once (cancel_in_flight).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "autoglm/engine.h"

namespace autoglm {

class InFlight {
 public:
  // Counts a generation as in flight for as long as its reply holds the returned token.
  std::shared_ptr<void> track(const std::shared_ptr<StreamHandle>& handle);
  // Asks every tracked generation to stop (each ends with finish_reason "cancelled").
  void cancel_all();
  int64_t count() const { return count_.load(); }

 private:
  std::mutex mutex_;
  std::vector<std::weak_ptr<StreamHandle>> handles_;
  std::shared_ptr<std::atomic<int64_t>> counter_ = std::make_shared<std::atomic<int64_t>>(0);
  std::atomic<int64_t>& count_ = *counter_;
};

}  // namespace autoglm
