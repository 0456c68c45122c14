// Token buckets per client, with time as a parameter: the burst, the refill rate, the wait a
// refused request is told, clients kept apart, and "off".
#include <gtest/gtest.h>

#include "server/http/rate_limiter.h"

namespace autoglm {
namespace {

using Clock = RateLimiter::Clock;

TEST(RateLimiter, BurstThenTheRate) {
  RateLimiter limiter(2.0, 3);
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(limiter.take("a", t0)) << i;
  const auto wait = limiter.take("a", t0);
  ASSERT_TRUE(wait);
  EXPECT_NEAR(*wait, 0.5, 1e-9);
  EXPECT_FALSE(limiter.take("b", t0)) << "another client has its own bucket";
  EXPECT_TRUE(limiter.take("a", t0 + std::chrono::milliseconds(400)));
  EXPECT_FALSE(limiter.take("a", t0 + std::chrono::milliseconds(500)));
  EXPECT_TRUE(limiter.take("a", t0 + std::chrono::milliseconds(500)));
  // A long pause refills to the burst, not beyond.
  const auto later = t0 + std::chrono::seconds(100);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(limiter.take("a", later)) << i;
  EXPECT_TRUE(limiter.take("a", later));
}

TEST(RateLimiter, ZeroRateIsOff) {
  RateLimiter limiter(0, 1);
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limiter.take("a"));
}

}  // namespace
}  // namespace autoglm
