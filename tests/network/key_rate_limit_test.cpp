// The per-key token bucket on its own clock: a burst of the limit, then one request per
// 60 / limit seconds, keys independent, and 0 for no limit.
#include <gtest/gtest.h>

#include "network/key_rate_limit.h"

namespace orchard::network {
namespace {

TEST(KeyRateLimiter, BurstThenSustainedRatePerKey) {
  KeyRateLimiter limit(6);  // a request every 10 s once the burst is spent
  const int64_t t0 = 1'700'000'000'000;
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(limit.admit("a", t0)) << i;
  const auto wait = limit.admit("a", t0);
  ASSERT_TRUE(wait);
  EXPECT_EQ(*wait, 10'000);
  EXPECT_FALSE(limit.admit("b", t0)) << "another key has its own bucket";
  EXPECT_TRUE(limit.admit("a", t0 + 9'999));
  EXPECT_FALSE(limit.admit("a", t0 + 10'000));
  EXPECT_TRUE(limit.admit("a", t0 + 10'001));
  // A minute idle refills the whole burst, no more.
  const int64_t later = t0 + 10'000 + 120'000;
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(limit.admit("a", later)) << i;
  EXPECT_TRUE(limit.admit("a", later));
  // A clock that steps back does not mint requests.
  EXPECT_TRUE(limit.admit("a", later - 50'000));
}

TEST(KeyRateLimiter, ZeroMeansUnlimited) {
  KeyRateLimiter none(0);
  for (int i = 0; i < 10'000; ++i) ASSERT_FALSE(none.admit("a", 0));
}

}  // namespace
}  // namespace orchard::network
