// The CPU backends' own ops (engine/kernels/cpu/cpu_backend.h): the batched router logits, MoE
// routing over a batch, SwiGLU's activation and the oracle backend's row widening. Every other op is a kernel
// of this folder, tested against its oracle in its own test; the whole forward pass on both backends is
// engine/model/forward_test.cc's OracleBackendGivesTheCpuKernelsLogits.
#include "engine/kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/cpu_features.h"
#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/isa_test_support.h"
#include "engine/kernels/cpu/moe_route.h"
#include "engine/kernels/cpu/row_ops.h"
#include "engine/kernels/cpu/vector_ops.h"

namespace tandem::engine::kernels::cpu {
namespace {

// y[m, n] = x · wᵀ with every element DotF32 of its pair, whatever m, the threads or the ISA
// variant's split (a token's routing never depends on its batch), within fp32 of the oracle; the
// floats past y's end are untouched.
TEST(CpuBackendTest, RouterLogitsAreEachTokensDotProductsWhateverTheBatch) {
  ThreadPool pool(3);
  const CpuBackend cpu(&pool);
  const RefBackend ref;
  ForEachKernelIsa([&](KernelIsa isa) {
    for (int64_t m : {1, 17, 97}) {
      for (int64_t n : {13, 384}) {
        for (int64_t k : {97, 256}) {
          const std::vector<float> w = Gauss(n * k, static_cast<uint32_t>(n + k), 0.05f);
          const std::vector<float> x = Gauss(m * k, static_cast<uint32_t>(m * 7 + k));
          std::vector<float> got(m * n + 5, 1234.5f), want(m * n);
          cpu.MatmulF32(w.data(), n, k, x.data(), m, got.data());
          ref.MatmulF32(w.data(), n, k, x.data(), m, want.data());
          const std::string where = std::string(KernelIsaName(isa)) + " m=" + std::to_string(m) +
                                    " n=" + std::to_string(n) + " k=" + std::to_string(k);
          EXPECT_LE(Nmse(got, want), 1e-12) << where;
          for (int64_t i = 0; i < m * n; ++i) {
            const float alone = DotF32(x.data() + (i / n) * k, w.data() + (i % n) * k, k);
            ASSERT_EQ(std::memcmp(&got[i], &alone, sizeof(float)), 0) << where << " element " << i;
          }
          for (int64_t i = m * n; i < m * n + 5; ++i) EXPECT_EQ(got[i], 1234.5f) << where;
        }
      }
    }
  });
}

TEST(CpuBackendTest, SiluMulMatchesItsOracle) {
  ThreadPool pool(1);
  const CpuBackend cpu(&pool);
  const RefBackend ref;
  ForEachKernelIsa([&](KernelIsa isa) {
    for (int64_t n : {1, 17, 97, 7168}) {
      const std::vector<float> gate = Gauss(n, static_cast<uint32_t>(n), 3.0f);
      const std::vector<float> up = Gauss(n, static_cast<uint32_t>(n + 1));
      std::vector<float> got = gate, want = gate;
      cpu.SiluMul(got.data(), up.data(), n);
      ref.SiluMul(want.data(), up.data(), n);
      EXPECT_LE(Nmse(got, want), 1e-12) << KernelIsaName(isa) << " n=" << n;
    }
    // Past exp's fp32 range: silu(-90) is ~0 (not NaN: e^90 overflows), silu(90) is 90.
    std::vector<float> edge = {-90.0f, 90.0f, -1000.0f};
    const std::vector<float> up = {2.0f, 2.0f, 2.0f};
    cpu.SiluMul(edge.data(), up.data(), 3);
    EXPECT_LT(std::fabs(edge[0]), 1e-30f) << KernelIsaName(isa);
    EXPECT_EQ(edge[1], 180.0f) << KernelIsaName(isa);
    EXPECT_LT(std::fabs(edge[2]), 1e-30f) << KernelIsaName(isa);
  });
}

// Widening cached rows is exact (bf16) or one rounding of code value · scale (e4m3): the oracle
// backend and the kernel give the same bits; bf16 rows ignore the scale.
TEST(RefBackendTest, RowsToF32GivesTheKernelsBits) {
  const int64_t n = 9, width = 23, stride = 29;
  std::mt19937 rng(5);
  std::vector<uint16_t> bf16(n * stride);
  for (uint16_t& v : bf16) v = FloatToBf16(std::normal_distribution<float>(0.0f, 2.0f)(rng));
  std::vector<uint8_t> fp8(n * stride);
  for (uint8_t& v : fp8) {
    do v = static_cast<uint8_t>(rng());
    while ((v & 0x7f) == 0x7f);
  }
  ThreadPool pool(1);
  const CpuBackend cpu(&pool);
  const RefBackend ref;
  for (const RowsRef rows :
       {RowsRef{bf16.data(), RowFormat::kBf16, stride}, RowsRef{fp8.data(), RowFormat::kFp8E4M3, stride}}) {
    for (float scale : {1.0f, 0.0123f}) {
      std::vector<float> a(n * width), b(n * width);
      cpu.RowsToF32(rows, n, width, scale, a.data());
      ref.RowsToF32(rows, n, width, scale, b.data());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << scale;
    }
  }
}

// A batch of tokens is routed as each token alone (the backend routes a layer's tokens in one call),
// in every grouping mode: top_k distinct experts from the kept groups, gates summing to the scaling
// factor when normalized.
TEST(MoeRouteTest, EachTokenOfABatchIsRoutedAsAlone) {
  const int64_t tokens = 17, experts = 64;
  const std::vector<float> logits = Gauss(tokens * experts, 3);
  const std::vector<float> bias = Gauss(experts, 4, 0.1f);
  for (MoeRouting::Groups groups :
       {MoeRouting::Groups::kNone, MoeRouting::Groups::kSumOfTwoBest, MoeRouting::Groups::kBest}) {
    MoeRouting r;
    r.experts = experts;
    r.top_k = 6;
    r.groups = 8;
    r.top_groups = 3;
    r.group_score = groups;
    r.scaling = 2.5;
    std::vector<int32_t> chosen(tokens * r.top_k);
    std::vector<float> gates(tokens * r.top_k);
    MoeRoute(r, logits.data(), tokens, bias.data(), chosen.data(), gates.data());
    for (int64_t t = 0; t < tokens; ++t) {
      std::vector<int32_t> alone(r.top_k);
      std::vector<float> alone_gates(r.top_k);
      MoeRoute(r, logits.data() + t * experts, 1, bias.data(), alone.data(), alone_gates.data());
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), chosen.begin() + t * r.top_k)) << t;
      EXPECT_TRUE(std::equal(alone_gates.begin(), alone_gates.end(), gates.begin() + t * r.top_k)) << t;
      std::vector<bool> group_used(r.groups, false);
      double sum = 0;
      for (int64_t k = 0; k < r.top_k; ++k) {
        const int32_t e = chosen[t * r.top_k + k];
        ASSERT_GE(e, 0);
        ASSERT_LT(e, experts);
        EXPECT_EQ(std::count(alone.begin(), alone.end(), e), 1) << t;
        group_used[e / (experts / r.groups)] = true;
        sum += gates[t * r.top_k + k];
      }
      if (groups != MoeRouting::Groups::kNone) {
        EXPECT_LE(std::count(group_used.begin(), group_used.end(), true), r.top_groups) << t;
      }
      EXPECT_NEAR(sum, r.scaling, 1e-5) << t;
    }
  }
}

}  // namespace
}  // namespace tandem::engine::kernels::cpu
