#include "controller/kube/cancel.h"

#include <thread>

#include <gtest/gtest.h>

namespace tandem::controller::kube {
namespace {

TEST(CancelToken, RunsCallbacksOnceAndLateRegistrationsAtOnce) {
  CancelToken token;
  int a = 0, b = 0, c = 0;
  token.Register([&] { ++a; });
  const uint64_t id_b = token.Register([&] { ++b; });
  token.Unregister(id_b);
  EXPECT_FALSE(token.cancelled());
  token.Cancel();
  token.Cancel();
  EXPECT_TRUE(token.cancelled());
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 0);
  token.Register([&] { ++c; });
  EXPECT_EQ(c, 1);
}

TEST(CancelToken, CancelFromAnotherThread) {
  CancelToken token;
  std::atomic<int> ran{0};
  token.Register([&] { ran.fetch_add(1); });
  std::thread t([&] { token.Cancel(); });
  t.join();
  EXPECT_EQ(ran.load(), 1);
  EXPECT_TRUE(token.cancelled());
}

}  // namespace
}  // namespace tandem::controller::kube
