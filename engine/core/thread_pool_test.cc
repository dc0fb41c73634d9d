#include "engine/core/thread_pool.h"

#include <atomic>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::engine {
namespace {

TEST(SplitRangeTest, CoversRangeDisjointlyOnGrainBoundaries) {
  for (int64_t n : {1, 15, 16, 17, 100, 14336}) {
    for (int threads : {1, 2, 3, 8}) {
      int64_t expect_begin = 0;
      for (int t = 0; t < threads; ++t) {
        int64_t b, e;
        SplitRange(n, 16, threads, t, &b, &e);
        EXPECT_EQ(b, expect_begin) << n << " " << threads << " " << t;
        EXPECT_LE(b, e);
        if (e < n) {
          EXPECT_EQ(e % 16, 0);
        }
        expect_begin = e;
      }
      EXPECT_EQ(expect_begin, n);
    }
  }
}

TEST(ThreadPoolTest, EveryIndexVisitedOnceAcrossManyCalls) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.num_threads(), 3);
  std::vector<std::atomic<int>> hits(1000);
  for (int round = 0; round < 200; ++round) {
    pool.ParallelFor(1000, 7, [&](int64_t b, int64_t e, int thread) {
      EXPECT_GE(thread, 0);
      EXPECT_LT(thread, 3);
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
  }
  for (auto& h : hits) EXPECT_EQ(h.load(), 200);
}

// More threads than cores and near-empty jobs: the caller often runs every chunk itself while
// workers still hold the previous job's snapshot. Each chunk index must run exactly once per call,
// with the range that index owns.
TEST(ThreadPoolTest, EachChunkRunsOncePerCallWhenTheCallerClaimsAhead) {
  ThreadPool pool(4);
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::atomic<int>> runs(4);
    pool.ParallelFor(4, 1, [&](int64_t b, int64_t e, int chunk) {
      EXPECT_EQ(b, chunk);
      EXPECT_EQ(e, chunk + 1);
      runs[static_cast<size_t>(chunk)].fetch_add(1);
    });
    for (auto& r : runs) ASSERT_EQ(r.load(), 1) << "round " << round;
  }
}

TEST(ThreadPoolTest, SingleThreadRunsInline) {
  ThreadPool pool(1);
  int calls = 0;
  pool.ParallelFor(10, 1, [&](int64_t b, int64_t e, int thread) {
    ++calls;
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
    EXPECT_EQ(thread, 0);
  });
  EXPECT_EQ(calls, 1);
  pool.ParallelFor(0, 1, [&](int64_t, int64_t, int) { ++calls; });
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace tandem::engine
