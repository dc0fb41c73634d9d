// The expanded MLA attention kernel (mla_prefill.h) against its double oracle, in every ISA
// variant this host runs: prompts of 1, 17 and 97 tokens and chunks continuing a cached prefix
// (across key blocks), 1, 3 and 8 heads at odd widths and one Kimi-wide head pair, causal and
// DSA-masked (a query that sees nothing gets zeros), outputs poisoned in and around what a call
// writes; and, in every variant, the same bits for any thread count and however the prompt was
// chunked.
#include "engine/kernels/cpu/mla_prefill.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/thread_pool.h"
#include "engine/kernels/cpu/isa_test_support.h"
#include "engine/kernels/cpu/mla_prefill_test_case.h"

namespace tandem::engine::kernels::cpu {
namespace {

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();
// fp32 scores and sums, ExpF32 (2 ulp) against double.
constexpr double kNmseMlaPrefill = 1e-10;
constexpr int64_t kGuard = 7;  // poisoned floats after the output

// The kernel's output for `c` on `threads` threads, kGuard poisoned floats after it.
std::vector<float> RunKernel(const MlaPrefillCase& c, int threads) {
  ThreadPool pool(threads);
  std::vector<float> out(c.OutFloats() + kGuard, kPoison);
  MlaPrefill(c.Input(), c.shape, &pool, out.data());
  return out;
}

TEST(MlaPrefillTest, EveryVariantMatchesTheOracle) {
  const MlaPrefillShape shapes[] = {PrefillShape(1, 16, 8, 12, 0.3f), PrefillShape(3, 13, 6, 9, 0.35f),
                                    PrefillShape(8, 16, 8, 16, 0.25f), PrefillShape(2, 128, 64, 128, 0.07f)};
  const int64_t steps[][2] = {{0, 1}, {0, 17}, {0, 97}, {40, 17}, {150, 9}, {5, 97}};  // {past, new}
  ForEachKernelIsa([&](KernelIsa isa) {
    uint32_t seed = 1;
    for (const MlaPrefillShape& shape : shapes) {
      for (const auto& step : steps) {
        for (bool masked : {false, true}) {
          const MlaPrefillCase c(shape, step[0], step[1], masked, seed++);
          const std::vector<float> want = c.Ref();
          const std::vector<float> got = RunKernel(c, 2);
          const std::string what = std::string(KernelIsaName(isa)) + " " + c.Name();
          EXPECT_LE(Nmse(got, want), kNmseMlaPrefill) << what;
          for (int64_t i = 0; i < c.OutFloats(); ++i) ASSERT_FALSE(std::isnan(got[i])) << what << " at " << i;
          for (int64_t i = c.OutFloats(); i < c.OutFloats() + kGuard; ++i) {
            ASSERT_TRUE(std::isnan(got[i])) << what << ": wrote past the end at " << i;
          }
          if (masked && c.num_new > 2) {  // query 1 sees no key
            for (int64_t i = 0; i < shape.heads * shape.v; ++i) {
              ASSERT_EQ(got[shape.heads * shape.v + i], 0.0f) << what;
            }
          }
        }
      }
    }
  });
}

TEST(MlaPrefillTest, OneKeyGivesItsValue) {
  const MlaPrefillCase c(PrefillShape(3, 13, 6, 9, 0.35f), 0, 1, false, 7);
  const std::vector<float> got = RunKernel(c, 1);
  for (int64_t h = 0; h < 3; ++h) {
    for (int64_t d = 0; d < 9; ++d) EXPECT_EQ(got[h * 9 + d], c.kv[h * (13 + 9) + 13 + d]) << h << " " << d;
  }
}

TEST(MlaPrefillTest, SameBitsForAnyThreadsAndAnyChunking) {
  // Value widths that every variant splits differently into vectors and single columns.
  const MlaPrefillShape shapes[] = {PrefillShape(3, 16, 8, 12, 0.3f), PrefillShape(2, 13, 6, 21, 0.3f)};
  ForEachKernelIsa([&](KernelIsa isa) {
    for (const MlaPrefillShape& shape : shapes) {
      for (bool masked : {false, true}) {
        const MlaPrefillCase whole(shape, 0, 150, masked, 11);
        const std::string what = std::string(KernelIsaName(isa)) + " " + whole.Name();
        const std::vector<float> one = RunKernel(whole, 1);
        for (int threads : {2, 3}) {
          EXPECT_EQ(
              std::memcmp(RunKernel(whole, threads).data(), one.data(), whole.OutFloats() * sizeof(float)), 0)
              << what << ", " << threads << " threads";
        }
        // The prompt's last 61 tokens as a chunk over its first 89 cached: the same queries, keys,
        // values and mask rows give the same bits (other query groups, other key counts per pass).
        const int64_t split = 89, context = whole.past + whole.num_new;
        const int64_t qrow = shape.heads * (shape.nope + shape.rope);
        MlaPrefillCase chunk = whole;
        chunk.past = split;
        chunk.num_new = whole.num_new - split;
        chunk.q.assign(whole.q.begin() + split * qrow, whole.q.end());
        if (masked) chunk.mask.assign(whole.mask.begin() + split * context, whole.mask.end());
        const std::vector<float> part = RunKernel(chunk, 2);
        const int64_t orow = shape.heads * shape.v;
        EXPECT_EQ(std::memcmp(part.data(), one.data() + split * orow, chunk.OutFloats() * sizeof(float)), 0)
            << what << ", chunked";
      }
    }
  });
}

}  // namespace
}  // namespace tandem::engine::kernels::cpu
