#include "engine/formats/convert.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/test_skip.h"
#include "engine/formats/float_codecs.h"

namespace tandem::engine {
namespace {

std::vector<uint16_t> RandomBf16(size_t n, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<uint16_t> out(n);
  for (auto& v : out) v = FloatToBf16(dist(rng));
  return out;
}

// The e4m3 code nearest to `x` (float64), found by searching the grid itself: the 127 finite
// non-negative codes decoded from their definition (bias 7, 3 mantissa bits, subnormals m x 2^-9),
// ties to the even code; |x| >= 448 saturates to 0x7e, NaN is 0x7f; the sign is kept (-0 too).
// Independent of FloatToFp8E4M3's bit arithmetic.
uint8_t NearestE4M3(double x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return sign | 0x7f;
  const double a = std::fabs(x);
  if (a >= 448.0) return sign | 0x7e;
  uint8_t best = 0;
  double best_err = INFINITY;
  for (int c = 0; c <= 0x7e; ++c) {
    const int e = c >> 3, m = c & 7;
    const double v = e == 0 ? m * std::ldexp(1.0, -9) : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
    const double err = std::fabs(a - v);
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = static_cast<uint8_t>(c);
      best_err = err;
    }
  }
  return sign | best;
}

// Every one of the 65,536 bf16 inputs, at several scales, against the float64 rounding of the
// grid: the reference encoder and the dispatched (vectorized) one.
TEST(ConvertTest, Bf16ToFp8MatchesAFloat64RoundingOfTheE4M3Grid) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<uint8_t> ref(all.size()), fast(all.size());
  for (float inv_scale : {1.0f, 1.0f / 0.02f, 3.7f, 1.0f / 448.0f}) {
    ConvertBf16ToFp8E4M3Ref(all.data(), ref.data(), all.size(), inv_scale);
    ConvertBf16ToFp8E4M3(all.data(), fast.data(), all.size(), inv_scale);
    for (size_t i = 0; i < all.size(); ++i) {
      // The product is formed in float, as the conversion specifies; the rounding is the oracle's.
      const float product = Bf16ToFloat(all[i]) * inv_scale;
      const uint8_t want = NearestE4M3(static_cast<double>(product));
      ASSERT_EQ(ref[i], want) << "bf16 0x" << std::hex << i << " inv_scale " << inv_scale;
      ASSERT_EQ(fast[i], want) << "bf16 0x" << std::hex << i << " inv_scale " << inv_scale;
    }
  }
}

TEST(ConvertTest, ScaleMapsAbsMaxToFp8Max) {
  std::vector<uint16_t> in = {FloatToBf16(1.0f), FloatToBf16(-8.96f), FloatToBf16(2.0f)};
  float scale = Fp8E4M3ScaleForBf16(in.data(), in.size());
  EXPECT_FLOAT_EQ(scale, Bf16ToFloat(FloatToBf16(-8.96f)) * -1.0f / kFp8E4M3Max);
  std::vector<uint16_t> zeros(5, 0);
  EXPECT_EQ(Fp8E4M3ScaleForBf16(zeros.data(), zeros.size()), 1.0f);
}

// A scaled FP8 round trip of Gaussian data keeps the relative Frobenius error near E4M3's
// half-ulp (2^-4 relative), far below what a wrong scale or a dropped bit would give.
TEST(ConvertTest, ScaledRoundTripRelativeError) {
  const size_t n = 64 * 576;  // one page of 64 tokens of MLA latent
  std::vector<uint16_t> in = RandomBf16(n, 1.5f, 7);
  float scale = Fp8E4M3ScaleForBf16(in.data(), n);
  std::vector<uint8_t> fp8(n);
  std::vector<uint16_t> back(n);
  ConvertBf16ToFp8E4M3Ref(in.data(), fp8.data(), n, 1.0f / scale);
  ConvertFp8E4M3ToBf16Ref(fp8.data(), back.data(), n, scale);
  double err = 0, ref = 0;
  for (size_t i = 0; i < n; ++i) {
    double a = Bf16ToFloat(in[i]), b = Bf16ToFloat(back[i]);
    err += (a - b) * (a - b);
    ref += a * a;
  }
  double rel = std::sqrt(err / ref);
  EXPECT_LT(rel, 0.04);
  EXPECT_GT(rel, 0.005);  // FP8 is lossy: an exact round trip would mean no conversion happened
}

TEST(ConvertTest, TableFp8ToBf16MatchesRefForEveryCode) {
  // Every code, at lengths that end inside a 32-code SIMD step, at scales whose products round,
  // overflow to infinity and fall into bf16 subnormals; the output past n is never written.
  for (size_t n : {size_t{768}, size_t{1}, size_t{31}, size_t{33}, size_t{777}}) {
    std::vector<uint8_t> codes(n);
    for (size_t i = 0; i < n; ++i) codes[i] = static_cast<uint8_t>(i * 37 + i / 256);
    for (float scale : {1.0f, 0.0171f, 3.5e-3f, 97.0f, 1e36f, 1e-40f}) {
      std::vector<uint16_t> want(n + 5, 0xabcd), got(n + 5, 0xabcd);
      ConvertFp8E4M3ToBf16Ref(codes.data(), want.data(), n, scale);
      ConvertFp8E4M3ToBf16(codes.data(), got.data(), n, scale);
      EXPECT_EQ(got, want) << "n " << n << " scale " << scale;
    }
  }
}

}  // namespace
}  // namespace tandem::engine

namespace tandem::engine {
namespace {

// Every variant the machine has (the ISA override limits the others away), each held to the
// scalar reference bit for bit: every bf16 bit pattern (NaNs, infinities, subnormals, the round-to-
// even ties of the e4m3 grid) under scales that put them in every e4m3 range, and every tail length.
class ConvertIsaTest : public ::testing::TestWithParam<ConvertIsa> {
 protected:
  void TearDown() override { LimitConvertIsaForTesting(ConvertIsa::kAvx512); }
};

TEST_P(ConvertIsaTest, Bf16ToFp8IsTheReferenceForEveryInput) {
  if (!ConvertHostRuns(GetParam())) TANDEM_SKIP_ISA_ABSENT() << "this CPU cannot run this variant";
  LimitConvertIsaForTesting(GetParam());
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<uint8_t> want(all.size()), got(all.size());
  for (float inv_scale : {1.0f, 1.0f / 0.02f, 448.0f, 1.0f / 448.0f, 3.7f, 1e-30f, 1e30f}) {
    ConvertBf16ToFp8E4M3Ref(all.data(), want.data(), all.size(), inv_scale);
    ConvertBf16ToFp8E4M3(all.data(), got.data(), all.size(), inv_scale);
    for (size_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << "bf16 0x" << std::hex << i << " inv_scale " << inv_scale;
    }
  }
  for (size_t n = 0; n <= 40; ++n) {  // tails, and nothing written past n
    std::vector<uint16_t> in = RandomBf16(n, 3.0f, static_cast<uint32_t>(n + 100));
    std::vector<uint8_t> ref(n + 1, 0xAB), out(n + 1, 0xAB);
    ConvertBf16ToFp8E4M3Ref(in.data(), ref.data(), n, 50.0f);
    ConvertBf16ToFp8E4M3(in.data(), out.data(), n, 50.0f);
    EXPECT_EQ(out, ref) << "n=" << n;
  }
}

TEST_P(ConvertIsaTest, TableFp8ToBf16IsTheReferenceForEveryCode) {
  if (!ConvertHostRuns(GetParam())) TANDEM_SKIP_ISA_ABSENT() << "this CPU cannot run this variant";
  LimitConvertIsaForTesting(GetParam());
  std::vector<uint8_t> codes(256 * 3 + 5);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 7);
  std::vector<uint16_t> want(codes.size()), got(codes.size());
  for (float scale : {1.0f, 0.02f, 1e-3f}) {
    ConvertFp8E4M3ToBf16Ref(codes.data(), want.data(), codes.size(), scale);
    ConvertFp8E4M3ToBf16(codes.data(), got.data(), codes.size(), scale);
    EXPECT_EQ(got, want) << "scale " << scale;
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, ConvertIsaTest,
                         ::testing::Values(ConvertIsa::kPortable, ConvertIsa::kAvx2, ConvertIsa::kAvx512),
                         [](const ::testing::TestParamInfo<ConvertIsa>& info) {
                           switch (info.param) {
                             case ConvertIsa::kPortable: return std::string("portable");
                             case ConvertIsa::kAvx2: return std::string("avx2");
                             case ConvertIsa::kAvx512: return std::string("avx512");
                           }
                           return std::string("unknown");
                         });

}  // namespace
}  // namespace tandem::engine
