#include "server/in_flight.h"

namespace autoglm {

std::shared_ptr<void> InFlight::track(const std::shared_ptr<StreamHandle>& handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::erase_if(handles_, [](const std::weak_ptr<StreamHandle>& h) { return h.expired(); });
  handles_.push_back(handle);
  ++count_;
  return std::shared_ptr<void>(nullptr, [counter = counter_](void*) { --*counter; });
}

void InFlight::cancel_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& weak : handles_)
    if (auto h = weak.lock()) h->cancel();
}

}  // namespace autoglm
