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

namespace tandem::engine::kernels::cpu {
namespace {

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();
// fp32 scores and sums, ExpF32 (2 ulp) against double.
constexpr double kNmseMlaPrefill = 1e-10;
constexpr int64_t kGuard = 7;  // poisoned floats after the output

// One request's step: its queries, the keys and values of its context, the latent rows whose
// rotary part the keys share (kv_lora + rope wide, as the caller passes them), a DSA mask.
struct Case {
  MlaPrefillShape shape;
  int64_t past = 0, num_new = 0;
  std::vector<float> q, kv, lat;
  std::vector<uint8_t> mask;
  int64_t lora = 5;

  Case(MlaPrefillShape s, int64_t past_tokens, int64_t new_tokens, bool masked, uint32_t seed)
      : shape(s), past(past_tokens), num_new(new_tokens) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int64_t context = past + num_new;
    q.resize(num_new * s.heads * (s.nope + s.rope));
    kv.resize(context * s.heads * (s.nope + s.v));
    lat.resize(context * (lora + s.rope));
    for (float& x : q) x = u(rng);
    for (float& x : kv) x = u(rng);
    for (float& x : lat) x = u(rng);
    if (!masked) return;
    mask.resize(num_new * context);
    for (int64_t i = 0; i < num_new; ++i) {
      for (int64_t j = 0; j < context; ++j) mask[i * context + j] = rng() % 3 != 0;
    }
    if (num_new > 2) std::fill_n(mask.begin() + context, context, 0);  // query 1 sees no key
  }

  MlaPrefillInput Input() const {
    MlaPrefillInput in;
    in.q = q.data();
    in.kv = kv.data();
    in.k_rope = lat.data() + lora;
    in.k_rope_stride = lora + shape.rope;
    in.past = past;
    in.num_new = num_new;
    in.mask = mask.empty() ? nullptr : mask.data();
    return in;
  }
  int64_t OutFloats() const { return num_new * shape.heads * shape.v; }

  std::vector<float> Run(int threads) const {
    ThreadPool pool(threads);
    std::vector<float> out(OutFloats() + kGuard, kPoison);
    MlaPrefill(Input(), shape, &pool, out.data());
    return out;
  }
  std::vector<float> Ref() const {
    std::vector<float> out(OutFloats());
    MlaPrefillRef(Input(), shape, out.data());
    return out;
  }
};

MlaPrefillShape Shape(int64_t heads, int64_t nope, int64_t rope, int64_t v, float scale) {
  MlaPrefillShape s;
  s.heads = heads;
  s.nope = nope;
  s.rope = rope;
  s.v = v;
  s.scale = scale;
  return s;
}

std::string Name(const Case& c, bool masked) {
  return "heads " + std::to_string(c.shape.heads) + " nope " + std::to_string(c.shape.nope) + " past " +
         std::to_string(c.past) + " new " + std::to_string(c.num_new) + (masked ? " masked" : " causal");
}

TEST(MlaPrefillTest, EveryVariantMatchesTheOracle) {
  const MlaPrefillShape shapes[] = {Shape(1, 16, 8, 12, 0.3f), Shape(3, 13, 6, 9, 0.35f),
                                    Shape(8, 16, 8, 16, 0.25f), Shape(2, 128, 64, 128, 0.07f)};
  const int64_t steps[][2] = {{0, 1}, {0, 17}, {0, 97}, {40, 17}, {150, 9}, {5, 97}};  // {past, new}
  ForEachKernelIsa([&](KernelIsa isa) {
    uint32_t seed = 1;
    for (const MlaPrefillShape& shape : shapes) {
      for (const auto& step : steps) {
        for (bool masked : {false, true}) {
          const Case c(shape, step[0], step[1], masked, seed++);
          const std::vector<float> want = c.Ref();
          const std::vector<float> got = c.Run(2);
          const std::string what = std::string(KernelIsaName(isa)) + " " + Name(c, masked);
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
  const Case c(Shape(3, 13, 6, 9, 0.35f), 0, 1, false, 7);
  const std::vector<float> got = c.Run(1);
  for (int64_t h = 0; h < 3; ++h) {
    for (int64_t d = 0; d < 9; ++d) EXPECT_EQ(got[h * 9 + d], c.kv[h * (13 + 9) + 13 + d]) << h << " " << d;
  }
}

TEST(MlaPrefillTest, SameBitsForAnyThreadsAndAnyChunking) {
  // Value widths that every variant splits differently into vectors and single columns.
  const MlaPrefillShape shapes[] = {Shape(3, 16, 8, 12, 0.3f), Shape(2, 13, 6, 21, 0.3f)};
  ForEachKernelIsa([&](KernelIsa isa) {
    for (const MlaPrefillShape& shape : shapes) {
      for (bool masked : {false, true}) {
        const Case whole(shape, 0, 150, masked, 11);
        const std::string what = std::string(KernelIsaName(isa)) + " " + Name(whole, masked);
        const std::vector<float> one = whole.Run(1);
        for (int threads : {2, 3}) {
          EXPECT_EQ(std::memcmp(whole.Run(threads).data(), one.data(), whole.OutFloats() * sizeof(float)), 0)
              << what << ", " << threads << " threads";
        }
        // The prompt's last 61 tokens as a chunk over its first 89 cached: the same queries, keys,
        // values and mask rows give the same bits (other query groups, other key counts per pass).
        const int64_t split = 89, context = whole.past + whole.num_new;
        const int64_t qrow = shape.heads * (shape.nope + shape.rope);
        Case chunk = whole;
        chunk.past = split;
        chunk.num_new = whole.num_new - split;
        chunk.q.assign(whole.q.begin() + split * qrow, whole.q.end());
        if (masked) chunk.mask.assign(whole.mask.begin() + split * context, whole.mask.end());
        const std::vector<float> part = chunk.Run(2);
        const int64_t orow = shape.heads * shape.v;
        EXPECT_EQ(std::memcmp(part.data(), one.data() + split * orow, chunk.OutFloats() * sizeof(float)), 0)
            << what << ", chunked";
      }
    }
  });
}

}  // namespace
}  // namespace tandem::engine::kernels::cpu
