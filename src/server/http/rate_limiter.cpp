#include "server/http/rate_limiter.h"

#include <algorithm>

namespace autoglm {
namespace {

constexpr size_t kMaxClients = 100000;  // past it, full buckets (idle clients) are forgotten

}  // namespace

RateLimiter::RateLimiter(double per_second, double burst) : per_second_(per_second), burst_(std::max(1.0, burst)) {}

std::optional<double> RateLimiter::take(const std::string& client, Clock::time_point now) {
  if (per_second_ <= 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  auto refill = [&](Bucket& b) {
    const double elapsed = std::chrono::duration<double>(now - b.last).count();
    b.tokens = std::min(burst_, b.tokens + std::max(0.0, elapsed) * per_second_);
    b.last = now;
  };
  if (buckets_.size() >= kMaxClients)
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      refill(it->second);
      it = it->second.tokens >= burst_ ? buckets_.erase(it) : std::next(it);
    }
  auto [it, fresh] = buckets_.try_emplace(client, Bucket{burst_, now});
  Bucket& b = it->second;
  if (!fresh) refill(b);
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return std::nullopt;
  }
  return (1 - b.tokens) / per_second_;
}

}  // namespace autoglm
