#include "common/clock.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(ClockTest, SteadyClockIsMonotonic) {
  const Clock& clock = SteadyClock::Default();
  int64_t a = clock.NowNanos();
  int64_t b = clock.NowNanos();
  EXPECT_LE(a, b);
}

TEST(ClockTest, FakeClockMovesOnlyWhenAdvanced) {
  FakeClock clock(1000);
  EXPECT_EQ(clock.NowNanos(), 1000);
  EXPECT_EQ(clock.NowNanos(), 1000);
  clock.AdvanceMillis(3);
  EXPECT_EQ(clock.NowNanos(), 3'001'000);
  EXPECT_DOUBLE_EQ(clock.NowSeconds(), 3.001e-3);
}

}  // namespace
}  // namespace tandem
