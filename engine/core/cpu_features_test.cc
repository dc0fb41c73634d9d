#include "engine/core/cpu_features.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "engine/formats/convert.h"
#include "engine/kernels/cpu/matmul.h"
#include "engine/kernels/cpu/vector_ops.h"

namespace tandem::engine {
namespace {

TEST(KernelIsaTest, NamesParseBackAndNothingElseParses) {
  for (KernelIsa isa : {KernelIsa::kPortable, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    KernelIsa parsed = KernelIsa::kPortable;
    ASSERT_TRUE(ParseKernelIsa(KernelIsaName(isa), &parsed)) << KernelIsaName(isa);
    EXPECT_EQ(parsed, isa);
  }
  KernelIsa untouched = KernelIsa::kAvx2;
  for (const char* bad : {"", "AVX2", "avx", "avx512f", "sse4", "avx2 "}) {
    EXPECT_FALSE(ParseKernelIsa(bad, &untouched)) << "'" << bad << "'";
    EXPECT_EQ(untouched, KernelIsa::kAvx2);
  }
}

TEST(KernelIsaTest, HostIsaFollowsTheFeatureBits) {
  const CpuFeatures& cpu = HostCpuFeatures();
  const KernelIsa host = HostKernelIsa();
  EXPECT_EQ(host == KernelIsa::kAvx512, cpu.HasAvx2Kernels() && cpu.HasAvx512Kernels());
  EXPECT_EQ(host >= KernelIsa::kAvx2, cpu.HasAvx2Kernels());
}

// The ceiling caps every kernel family at once, and lifting it gives the host's widest back.
TEST(KernelIsaTest, TheCeilingCapsMatmulVectorOpsAndConvert) {
  const KernelIsa before = KernelIsaCeiling();
  for (KernelIsa ceiling : {KernelIsa::kPortable, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    SetKernelIsaCeiling(ceiling);
    const KernelIsa want = std::min(ceiling, HostKernelIsa());
    EXPECT_EQ(ActiveKernelIsa(), want);
    EXPECT_STREQ(kernels::cpu::MatmulIsa(), KernelIsaName(want)) << KernelIsaName(ceiling);
    EXPECT_STREQ(kernels::cpu::VectorOpsIsa(), KernelIsaName(want)) << KernelIsaName(ceiling);
    // The converters have their own host checks (AVX2 without F16C): never wider than the
    // ceiling, and as wide as the host and ceiling allow.
    const auto convert = static_cast<KernelIsa>(ActiveConvertIsa());
    EXPECT_LE(convert, ceiling);
    if (ConvertHostRuns(static_cast<ConvertIsa>(ceiling))) {
      EXPECT_EQ(convert, ceiling);
    }
  }
  SetKernelIsaCeiling(before);
}

}  // namespace
}  // namespace tandem::engine
