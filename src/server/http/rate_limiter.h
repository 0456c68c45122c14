// Requests per client as token buckets: each client (an API key, or the peer address when
// keys are off) may send `burst` requests at once and `per_second` on average. Time is a
// parameter, so the policy is tested without sleeping.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace autoglm {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  // per_second <= 0: no limit.
  RateLimiter(double per_second, double burst);

  // Takes one request from `client`'s bucket; when it is empty, the seconds until it is not.
  std::optional<double> take(const std::string& client, Clock::time_point now = Clock::now());

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point last;
  };
  double per_second_, burst_;
  std::mutex mutex_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace autoglm
