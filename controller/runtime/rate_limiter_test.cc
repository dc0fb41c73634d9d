#include "controller/runtime/rate_limiter.h"

#include <gtest/gtest.h>

namespace tandem::controller::runtime {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST(ItemExponentialFailureRateLimiter, DoublesFrom5msAndCapsAt1000s) {
  ItemExponentialFailureRateLimiter limiter(milliseconds(5), seconds(1000));
  nanoseconds want = milliseconds(5);
  for (int i = 0; i < 18; ++i) {  // 5 ms * 2^17 = 655 s, still under the cap
    EXPECT_EQ(limiter.When("a"), want) << "failure " << i;
    want *= 2;
  }
  EXPECT_EQ(limiter.When("a"), seconds(1000));                                 // 5 ms * 2^18 = 1310 s: capped
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(limiter.When("a"), seconds(1000));  // no overflow
  EXPECT_EQ(limiter.NumRequeues("a"), 2019);
}

TEST(ItemExponentialFailureRateLimiter, ItemsAreIndependentAndForgetResets) {
  ItemExponentialFailureRateLimiter limiter(milliseconds(5), seconds(1000));
  EXPECT_EQ(limiter.When("a"), milliseconds(5));
  EXPECT_EQ(limiter.When("a"), milliseconds(10));
  EXPECT_EQ(limiter.When("b"), milliseconds(5));
  EXPECT_EQ(limiter.NumRequeues("a"), 2);
  EXPECT_EQ(limiter.NumRequeues("b"), 1);
  limiter.Forget("a");
  EXPECT_EQ(limiter.NumRequeues("a"), 0);
  EXPECT_EQ(limiter.When("a"), milliseconds(5));
  EXPECT_EQ(limiter.When("b"), milliseconds(10));
}

TEST(BucketRateLimiter, BurstIsFreeThenOneTokenPerTenthOfASecond) {
  FakeClock clock;
  BucketRateLimiter limiter(clock, 10.0, 100);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(limiter.When("x"), nanoseconds(0)) << i;
  // Tokens are reserved ahead: the 101st waits 100 ms, the 102nd 200 ms, ...
  EXPECT_EQ(limiter.When("x"), milliseconds(100));
  EXPECT_EQ(limiter.When("y"), milliseconds(200));
  EXPECT_EQ(limiter.When("z"), milliseconds(300));
  // 1 s later 10 tokens have been refilled: 3 were already reserved, so 7 are free.
  clock.AdvanceMillis(1000);
  for (int i = 0; i < 7; ++i) ASSERT_EQ(limiter.When("x"), nanoseconds(0)) << i;
  EXPECT_EQ(limiter.When("x"), milliseconds(100));
  EXPECT_EQ(limiter.NumRequeues("x"), 0);
}

TEST(BucketRateLimiter, RefillStopsAtBurst) {
  FakeClock clock;
  BucketRateLimiter limiter(clock, 10.0, 5);
  clock.AdvanceMillis(3'600'000);  // an idle hour refills only `burst` tokens
  for (int i = 0; i < 5; ++i) ASSERT_EQ(limiter.When("x"), nanoseconds(0));
  EXPECT_EQ(limiter.When("x"), milliseconds(100));
}

TEST(DefaultControllerRateLimiter, MaxOfBackoffAndBucket) {
  FakeClock clock;
  auto limiter = NewDefaultControllerRateLimiter(clock);
  // Per-item backoff dominates while the bucket has tokens.
  EXPECT_EQ(limiter->When("a"), milliseconds(5));
  EXPECT_EQ(limiter->When("a"), milliseconds(10));
  EXPECT_EQ(limiter->NumRequeues("a"), 2);
  // Drain the bucket with other items (98 tokens left after the two above).
  for (int i = 0; i < 98; ++i) limiter->When("item-" + std::to_string(i));
  // Now the bucket dominates a fresh item's 5 ms backoff.
  EXPECT_EQ(limiter->When("fresh"), milliseconds(100));
  limiter->Forget("a");
  EXPECT_EQ(limiter->NumRequeues("a"), 0);
}

}  // namespace
}  // namespace tandem::controller::runtime
