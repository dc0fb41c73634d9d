// The vector loops (vector_ops.h) against their double oracles and against each other, in every
// variant this host runs: sizes 1, 17, 97 and the model's widths, fresh random inputs (seed
// printed), outputs poisoned past what a call may write.
#include "engine/kernels/cpu/vector_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/test_skip.h"
#include "engine/core/cpu_features.h"
#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/isa_test_support.h"

namespace tandem::engine::kernels::cpu {
namespace {

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();
// fp32 accumulation of at most 7,168 terms (fused or not) against the double oracle.
constexpr double kNmseAccumulation = 1e-10;
// ExpF32: within 2 ulp of e^x, (2 · 2^-23)^2 is 5.7e-14.
constexpr double kNmseElementwise = 1e-13;

const int64_t kSizes[] = {1, 17, 97, 576, 7168};

uint32_t FreshSeed() {
  const uint32_t seed = std::random_device{}();
  std::printf("[vector_ops] seed %u\n", seed);
  return seed;
}

std::vector<float> Gauss(int64_t n, std::mt19937* rng, float sigma = 1.0f) {
  std::normal_distribution<float> g(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = g(*rng);
  return v;
}

// got[0, n) against want, and got[n, got.size()) still poisoned.
void ExpectNmseAndUntouched(const std::vector<float>& got, const std::vector<float>& want, double bound,
                            const std::string& where) {
  const std::vector<float> head(got.begin(), got.begin() + static_cast<int64_t>(want.size()));
  EXPECT_LE(Nmse(head, want), bound) << where;
  for (size_t i = want.size(); i < got.size(); ++i)
    ASSERT_TRUE(std::isnan(got[i])) << where << ": wrote " << i;
}

TEST(VectorOpsTest, EveryVariantRunsHere) {
  std::string missing;
  if (HostKernelIsa() < KernelIsa::kAvx2) missing += " avx2";
  if (HostKernelIsa() < KernelIsa::kAvx512) missing += " avx512";
  if (!missing.empty()) TANDEM_SKIP_ISA_ABSENT() << "this CPU lacks these vector-op variants:" << missing;
}

TEST(VectorOpsTest, EveryLoopMatchesItsOracleAtOddSizes) {
  std::mt19937 rng(FreshSeed());
  ForEachKernelIsa([&](KernelIsa isa) {
    ASSERT_STREQ(VectorOpsIsa(), KernelIsaName(isa));
    for (int64_t n : kSizes) {
      const std::string where = std::string(KernelIsaName(isa)) + " n " + std::to_string(n);
      // DotF32: 8 dot products of n terms each.
      std::vector<float> dots(8), dots_ref(8);
      for (int k = 0; k < 8; ++k) {
        const std::vector<float> a = Gauss(n, &rng), b = Gauss(n, &rng, 3.0f);
        dots[k] = DotF32(a.data(), b.data(), n);
        dots_ref[k] = DotF32Ref(a.data(), b.data(), n);
      }
      EXPECT_LE(Nmse(dots, dots_ref), kNmseAccumulation) << "DotF32 " << where;
      // WeightedRowSum: up to 97 rows (some weights 0) of n + 5 columns in a stride of n + 9.
      const int64_t nrows = std::min<int64_t>(n, 97), dim = n + 5, stride = n + 9;
      std::vector<float> w = Gauss(nrows, &rng), rows = Gauss(nrows * stride, &rng, 2.0f);
      for (int64_t j = 1; j < nrows; j += 3) w[j] = 0.0f;
      std::vector<float> sum(dim + 7, kPoison), sum_ref(dim);
      WeightedRowSum(w.data(), rows.data(), nrows, stride, dim, sum.data());
      WeightedRowSumRef(w.data(), rows.data(), nrows, stride, dim, sum_ref.data());
      ExpectNmseAndUntouched(sum, sum_ref, kNmseAccumulation, "WeightedRowSum " + where);
      // ExpF32 over scores-like inputs; AddScaledF32 onto a residual.
      const std::vector<float> x = Gauss(n, &rng, 20.0f);
      std::vector<float> e(n + 7, kPoison), e_ref(n);
      ExpF32(x.data(), e.data(), n);
      ExpF32Ref(x.data(), e_ref.data(), n);
      ExpectNmseAndUntouched(e, e_ref, kNmseElementwise, "ExpF32 " + where);
      const std::vector<float> y0 = Gauss(n, &rng), dx = Gauss(n, &rng);
      std::vector<float> y(y0), y_ref(y0);
      y.resize(n + 7, kPoison);
      AddScaledF32(0.37f, dx.data(), y.data(), n);
      AddScaledF32Ref(0.37f, dx.data(), y_ref.data(), n);
      // Two roundings (product, sum) against one: within 2^-23 · (|y| + |a·x|) per element, which
      // a relative bound on the result cannot promise where y and a·x cancel.
      for (int64_t i = 0; i < n; ++i) {
        const double scale = std::fabs(static_cast<double>(y0[i])) + std::fabs(0.37 * dx[i]);
        ASSERT_LE(std::fabs(static_cast<double>(y[i]) - y_ref[i]), std::ldexp(scale, -23))
            << "AddScaledF32 " << where << " i " << i;
      }
      for (int64_t i = n; i < n + 7; ++i)
        ASSERT_TRUE(std::isnan(y[i])) << "AddScaledF32 " << where << ": wrote " << i;
    }
  });
}

TEST(VectorOpsTest, DotF32IsWithinFp32RoundingOfTheExactSum) {
  // Random magnitudes and signs (cancellation included), every tail length of the 16- and 8-lane
  // loops: |DotF32 - exact| <= n * 2^-24 * sum|a*b| (the textbook bound for any summation order
  // with fused products), and exact where every partial sum is representable.
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return static_cast<float>(static_cast<int64_t>(state % 2000001) - 1000000) * 1e-6f;
  };
  ForEachKernelIsa([&](KernelIsa isa) {
    ASSERT_STREQ(VectorOpsIsa(), KernelIsaName(isa));
    for (int64_t n : {0, 1, 5, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 97, 100, 256, 320, 513, 1024, 7168}) {
      std::vector<float> a(n), b(n);
      for (int64_t i = 0; i < n; ++i) a[i] = next() * (i % 7 == 0 ? 100.0f : 1.0f), b[i] = next();
      double exact = 0, magnitude = 0;
      for (int64_t i = 0; i < n; ++i) {
        exact += static_cast<double>(a[i]) * b[i];
        magnitude += std::fabs(static_cast<double>(a[i]) * b[i]);
      }
      EXPECT_LE(std::fabs(static_cast<double>(DotF32(a.data(), b.data(), n)) - exact),
                static_cast<double>(n) * std::ldexp(1.0, -24) * magnitude + 1e-30)
          << KernelIsaName(isa) << " n " << n;
      // Small integers: every product and partial sum is exact in fp32, so any order gives the sum.
      double ints = 0;
      for (int64_t i = 0; i < n; ++i) {
        a[i] = static_cast<float>(i % 13) - 6.0f, b[i] = static_cast<float>(i % 5) - 2.0f;
        ints += static_cast<double>(a[i]) * b[i];
      }
      EXPECT_EQ(static_cast<double>(DotF32(a.data(), b.data(), n)), ints) << KernelIsaName(isa) << " n " << n;
    }
  });
}

TEST(VectorOpsTest, MultiplyThenAddLoopsGiveThePortableBitsInEveryVariant) {
  // WeightedRowSum, AddScaledF32 and ExpF32 promise the portable loop's bits (only
  // DotF32 fuses): dims around every vector pass, some weights 0.
  const int64_t n = 37, stride = 211;
  std::vector<float> w(n), rows(n * stride);
  for (int64_t j = 0; j < n; ++j) w[j] = j % 5 == 3 ? 0.0f : std::sin(static_cast<float>(j) * 1.7f) / 7.0f;
  for (int64_t i = 0; i < n * stride; ++i) rows[i] = std::cos(static_cast<float>(i) * 0.61f) * 3.3f;
  std::vector<float> x;
  for (double v = -95.0; v <= 95.0; v += 0.0173) x.push_back(static_cast<float>(v));
  for (float v : {-87.33654f, -87.3365f, 88.7f, 1e-30f, -0.0f}) x.push_back(v);
  std::vector<std::vector<float>> portable;
  ForEachKernelIsa([&](KernelIsa isa) {
    ASSERT_STREQ(VectorOpsIsa(), KernelIsaName(isa));
    std::vector<std::vector<float>> got;
    for (int64_t dim : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 127, 128, 129, 130, 200, 211}) {
      std::vector<float> by_rows(dim, 0.0f), sum(dim, -1.0f);
      for (int64_t j = 0; j < n; ++j) {
        if (w[j] != 0.0f) AddScaledF32(w[j], rows.data() + j * stride, by_rows.data(), dim);
      }
      WeightedRowSum(w.data(), rows.data(), n, stride, dim, sum.data());
      for (int64_t d = 0; d < dim; ++d)
        ASSERT_EQ(sum[d], by_rows[d]) << KernelIsaName(isa) << " dim " << dim << " d " << d;
      got.push_back(sum);
    }
    std::vector<float> e(x.size());
    ExpF32(x.data(), e.data(), static_cast<int64_t>(x.size()));
    got.push_back(e);
    if (isa == KernelIsa::kPortable) {
      portable = got;
      return;
    }
    ASSERT_EQ(got.size(), portable.size());
    for (size_t k = 0; k < got.size(); ++k) {
      ASSERT_EQ(got[k].size(), portable[k].size());
      if (got[k].empty()) continue;  // dim 0: nothing written (and no buffer to compare)
      ASSERT_EQ(std::memcmp(got[k].data(), portable[k].data(), got[k].size() * sizeof(float)), 0)
          << KernelIsaName(isa) << " output " << k << " (the last is ExpF32)";
    }
  });
}

TEST(VectorOpsTest, AttentionWeightedSumsPageByPageIsOneWeightedRowSumPerWeightVector) {
  // The attention kernels' weighted sums over bf16 rows (attention.h) and WeightedRowSum over the
  // widened rows are the same sums: 1..6 weight vectors, some weights 0, dims around the vector
  // passes, rows in pages of 16 (the last one short), bit for bit in every variant.
  const int64_t n = 70, stride = 330, max_nw = 6;
  std::vector<float> w(max_nw * n), widened(n * stride);
  std::vector<uint16_t> rows(n * stride);
  for (int64_t i = 0; i < max_nw * n; ++i)
    w[i] = i % 6 == 1 || i % 11 == 4 ? 0.0f : std::sin(static_cast<float>(i) * 1.3f) / 5.0f;
  for (int64_t i = 0; i < n * stride; ++i) {
    rows[i] = FloatToBf16(std::cos(static_cast<float>(i) * 0.37f) * 2.1f);
    widened[i] = Bf16ToFloat(rows[i]);
  }
  ForEachKernelIsa([&](KernelIsa isa) {
    ASSERT_STREQ(VectorOpsIsa(), KernelIsaName(isa));
    for (int64_t nw : {1, 2, 3, 4, 5, 6}) {
      for (int64_t dim : {1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 256, 320}) {
        const int64_t out_stride = dim + 3;
        std::vector<float> got(nw * out_stride, 0.0f);
        for (int64_t first = 0; first < n; first += 16) {
          AttentionWeightedSums(w.data() + first, nw, n,
                                {rows.data() + first * stride, RowFormat::kBf16, stride},
                                std::min<int64_t>(16, n - first), dim, got.data(), out_stride);
        }
        for (int64_t h = 0; h < nw; ++h) {
          std::vector<float> expected(dim);
          WeightedRowSum(w.data() + h * n, widened.data(), n, stride, dim, expected.data());
          for (int64_t d = 0; d < dim; ++d)
            ASSERT_EQ(got[h * out_stride + d], expected[d])
                << KernelIsaName(isa) << " nw " << nw << " dim " << dim << " h " << h << " d " << d;
          for (int64_t d = dim; d < out_stride; ++d)
            ASSERT_EQ(got[h * out_stride + d], 0.0f) << "written past dim";
        }
      }
    }
  });
}

TEST(VectorOpsTest, ExpF32IsWithinTwoUlpAndTheSameAtEveryPosition) {
  // A sweep over [-90, 90] (every lane position and tail length of the 16- and 8-lane loops), plus
  // the edges: within 2 ulp of the double e^x where that is a normal fp32, 0 below ln(FLT_MIN),
  // e^88.7 above it, NaN for NaN; a value does not depend on where it sits in the array.
  std::vector<float> x;
  for (double v = -90.0; v <= 90.0; v += 0.0137) x.push_back(static_cast<float>(v));
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, -87.3365f, -87.33655f, 88.7f, 88.72f, 1e30f, -1e30f})
    x.push_back(v);
  x.push_back(-std::numeric_limits<float>::infinity());
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  ForEachKernelIsa([&](KernelIsa isa) {
    ASSERT_STREQ(VectorOpsIsa(), KernelIsaName(isa));
    std::vector<float> y(x.size());
    ExpF32(x.data(), y.data(), static_cast<int64_t>(x.size()));
    const float at_high = std::exp(88.7f);
    for (size_t i = 0; i < x.size(); ++i) {
      const float v = x[i];
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(y[i])) << KernelIsaName(isa);
        continue;
      }
      if (v < -87.33654f) {
        EXPECT_EQ(y[i], 0.0f) << KernelIsaName(isa) << " x " << v;
        continue;
      }
      const double want = std::exp(static_cast<double>(std::min(v, 88.7f)));
      const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
      EXPECT_LE(std::fabs(y[i] - want), 2 * ulp)
          << KernelIsaName(isa) << " x " << v << " got " << y[i] << " want " << want;
      if (v >= 88.7f) {
        EXPECT_NEAR(y[i], at_high, 2 * ulp);
      }
      float one;
      ExpF32(&x[i], &one, 1);
      ASSERT_EQ(std::memcmp(&one, &y[i], sizeof(float)), 0) << KernelIsaName(isa) << " position " << i;
    }
  });
}

}  // namespace
}  // namespace tandem::engine::kernels::cpu
