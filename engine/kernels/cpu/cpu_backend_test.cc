// The CPU backends' own ops (engine/kernels/cpu/cpu_backend.h): the batched router logits, SwiGLU's
// activation and the oracle backend's row widening. Every other op is a kernel of this folder,
// tested against its oracle in its own test; the whole forward pass on both backends is
// engine/model/forward_test.cc's OracleBackendGivesTheCpuKernelsLogits.
#include "engine/kernels/cpu/cpu_backend.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/cpu_features.h"
#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/isa_test_support.h"
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

}  // namespace
}  // namespace tandem::engine::kernels::cpu
