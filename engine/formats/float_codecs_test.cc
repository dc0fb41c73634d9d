#include "engine/formats/float_codecs.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::engine {
namespace {

// An independent oracle: the nearest representable magnitude by search over every code,
// ties to the even code, with an optional "virtual" code one step past the largest finite value
// (the infinity of IEEE-like formats, which round-to-nearest reaches at the half-way point).
class NearestOracle {
 public:
  template <typename Decode>
  NearestOracle(int bits, Decode decode, int overflow_code) : sign_bit_(1u << (bits - 1)) {
    for (uint32_t c = 0; c < sign_bit_; ++c) {
      double v = decode(c);
      if (std::isfinite(v)) table_.emplace_back(v, c);
    }
    std::sort(table_.begin(), table_.end());
    if (overflow_code >= 0) {
      double last = table_.back().first;
      double step = last - table_[table_.size() - 2].first;
      table_.emplace_back(last + step, static_cast<uint32_t>(overflow_code));
    }
  }

  uint32_t Encode(float x) const {
    uint32_t sign = std::signbit(x) ? sign_bit_ : 0;
    double a = std::fabs(static_cast<double>(x));
    auto it = std::lower_bound(table_.begin(), table_.end(), std::make_pair(a, 0u));
    if (it == table_.end()) return sign | table_.back().second;  // saturate (or infinity)
    if (it == table_.begin() || it->first == a) return sign | it->second;
    auto lo = it - 1;
    double dlo = a - lo->first, dhi = it->first - a;
    if (dlo < dhi) return sign | lo->second;
    if (dhi < dlo) return sign | it->second;
    return sign | ((lo->second & 1u) == 0 ? lo->second : it->second);
  }

  // Every finite positive value, sorted: used to build ties and near-ties.
  const std::vector<std::pair<double, uint32_t>>& table() const { return table_; }

 private:
  uint32_t sign_bit_;
  std::vector<std::pair<double, uint32_t>> table_;
};

// Random inputs that exercise a format: raw bit patterns, values spread log-uniformly over the
// format's range, exact midpoints between neighbours (ties) and their float neighbours.
std::vector<float> InterestingFloats(const NearestOracle& oracle, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> out;
  out.reserve(count + 64);
  const auto& t = oracle.table();
  double lo_exp = std::log2(t[1].first) - 2, hi_exp = std::log2(t.back().first) + 1;
  std::uniform_real_distribution<double> expo(lo_exp, hi_exp);
  std::uniform_int_distribution<size_t> pick(0, t.size() - 2);
  while (out.size() < count) {
    float sign = (rng() & 1u) ? -1.0f : 1.0f;
    switch (rng() % 4) {
      case 0: {
        uint32_t bits = rng();
        float f;
        std::memcpy(&f, &bits, 4);
        if (!std::isnan(f)) out.push_back(f);
        break;
      }
      case 1: out.push_back(sign * static_cast<float>(std::exp2(expo(rng)))); break;
      default: {
        size_t i = pick(rng);
        float mid = static_cast<float>((t[i].first + t[i + 1].first) / 2);
        out.push_back(sign * mid);
        out.push_back(sign * std::nextafter(mid, 0.0f));
        out.push_back(sign * std::nextafter(mid, std::numeric_limits<float>::infinity()));
      }
    }
  }
  const float edges[] = {0.0f,
                         -0.0f,
                         448.0f,
                         449.0f,
                         464.0f,
                         465.0f,
                         480.0f,
                         1e30f,
                         57344.0f,
                         61439.0f,
                         61440.0f,
                         65504.0f,
                         65519.0f,
                         65520.0f,
                         1.0f / 512,
                         1.0f / 1024,
                         3.0f / 2048,
                         std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::max(),
                         std::numeric_limits<float>::denorm_min(),
                         std::numeric_limits<float>::min()};
  for (float e : edges) {
    out.push_back(e);
    out.push_back(-e);
  }
  return out;
}

constexpr size_t kRandomSamples = 1'000'000;

// ---- FP8 E4M3 ------------------------------------------------------------------------------
double E4M3Formula(uint32_t c) {
  int exp = (c >> 3) & 15, mant = c & 7;
  if (exp == 15 && mant == 7) return std::numeric_limits<double>::quiet_NaN();
  double mag = exp == 0 ? std::ldexp(mant / 8.0, -6) : std::ldexp(1.0 + mant / 8.0, exp - 7);
  return (c & 0x80) ? -mag : mag;
}

TEST(Fp8E4M3Test, AllCodesDecode) {
  for (uint32_t c = 0; c < 256; ++c) {
    double want = E4M3Formula(c);
    float got = Fp8E4M3ToFloat(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << "code " << c;
      EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << "code " << c;
    }
  }
  EXPECT_EQ(Fp8E4M3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(Fp8E4M3ToFloat(0x01), 1.0f / 512);  // smallest subnormal, 2^-9
  EXPECT_EQ(Fp8E4M3ToFloat(0x08), 1.0f / 64);   // smallest normal, 2^-6
  EXPECT_TRUE(std::isnan(Fp8E4M3ToFloat(0x7f)));
  EXPECT_TRUE(std::isnan(Fp8E4M3ToFloat(0xff)));
}

TEST(Fp8E4M3Test, EncodeDecodeRoundTripsEveryCode) {
  for (uint32_t c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    EXPECT_EQ(FloatToFp8E4M3(Fp8E4M3ToFloat(static_cast<uint8_t>(c))), c) << "code " << c;
  }
}

TEST(Fp8E4M3Test, SaturatesAndKeepsNaN) {
  EXPECT_EQ(FloatToFp8E4M3(1e9f), 0x7e);
  EXPECT_EQ(FloatToFp8E4M3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(FloatToFp8E4M3(std::numeric_limits<float>::quiet_NaN()) & 0x7f, 0x7f);
  EXPECT_EQ(FloatToFp8E4M3(464.0f), 0x7e);       // tie between 448 and (absent) 480
  EXPECT_EQ(FloatToFp8E4M3(1.0f / 1024), 0x00);  // tie between 0 and 2^-9 goes to even (0)
  EXPECT_EQ(FloatToFp8E4M3(3.0f / 1024), 0x02);  // tie between 1 and 2 (x 2^-9) goes to 2
}

TEST(Fp8E4M3Test, MatchesNearestOracleOnMillionFloats) {
  NearestOracle oracle(8, E4M3Formula, -1);
  size_t mismatches = 0;
  for (float x : InterestingFloats(oracle, kRandomSamples, 1)) {
    uint32_t want = oracle.Encode(x);
    uint32_t got = FloatToFp8E4M3(x);
    if (got != want && ++mismatches <= 10) ADD_FAILURE() << "x=" << x << " got " << got << " want " << want;
  }
  EXPECT_EQ(mismatches, 0u);
}

// ---- FP8 E5M2 ------------------------------------------------------------------------------
double E5M2Formula(uint32_t c) {
  int exp = (c >> 2) & 31, mant = c & 3;
  double mag;
  if (exp == 31) {
    mag = mant == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    mag = exp == 0 ? std::ldexp(mant / 4.0, -14) : std::ldexp(1.0 + mant / 4.0, exp - 15);
  }
  return (c & 0x80) ? -mag : mag;
}

TEST(Fp8E5M2Test, AllCodesDecodeAndRoundTrip) {
  for (uint32_t c = 0; c < 256; ++c) {
    double want = E5M2Formula(c);
    float got = Fp8E5M2ToFloat(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
      continue;
    }
    EXPECT_EQ(static_cast<double>(got), want) << "code " << c;
    EXPECT_EQ(FloatToFp8E5M2(got), c) << "code " << c;
  }
  EXPECT_EQ(Fp8E5M2ToFloat(0x7b), kFp8E5M2Max);
}

TEST(Fp8E5M2Test, MatchesNearestOracleOnMillionFloats) {
  NearestOracle oracle(8, E5M2Formula, 0x7c);
  size_t mismatches = 0;
  for (float x : InterestingFloats(oracle, kRandomSamples, 2)) {
    uint32_t want = oracle.Encode(x);
    uint32_t got = FloatToFp8E5M2(x);
    if (got != want && ++mismatches <= 10) ADD_FAILURE() << "x=" << x << " got " << got << " want " << want;
  }
  EXPECT_EQ(mismatches, 0u);
}

// ---- FP16 and BF16 ---------------------------------------------------------------------------
double Fp16Formula(uint32_t c) {
  int exp = (c >> 10) & 31, mant = c & 1023;
  double mag;
  if (exp == 31) {
    mag = mant == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    mag = exp == 0 ? std::ldexp(mant / 1024.0, -14) : std::ldexp(1.0 + mant / 1024.0, exp - 15);
  }
  return (c & 0x8000) ? -mag : mag;
}

double Bf16Formula(uint32_t c) {
  int exp = (c >> 7) & 255, mant = c & 127;
  double mag;
  if (exp == 255) {
    mag = mant == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    mag = exp == 0 ? std::ldexp(mant / 128.0, -126) : std::ldexp(1.0 + mant / 128.0, exp - 127);
  }
  return (c & 0x8000) ? -mag : mag;
}

TEST(Fp16Test, AllCodesDecodeAndRoundTrip) {
  for (uint32_t c = 0; c < 65536; ++c) {
    double want = Fp16Formula(c);
    float got = Fp16ToFloat(static_cast<uint16_t>(c));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << "code " << c;
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), want) << "code " << c;
    ASSERT_EQ(FloatToFp16(got), c) << "code " << c;
  }
}

TEST(Fp16Test, MatchesNearestOracleOnMillionFloats) {
  NearestOracle oracle(16, Fp16Formula, 0x7c00);
  size_t mismatches = 0;
  for (float x : InterestingFloats(oracle, kRandomSamples, 3)) {
    uint32_t want = oracle.Encode(x);
    uint32_t got = FloatToFp16(x);
    if (got != want && ++mismatches <= 10) ADD_FAILURE() << "x=" << x << " got " << got << " want " << want;
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(Bf16Test, AllCodesDecodeAndRoundTrip) {
  for (uint32_t c = 0; c < 65536; ++c) {
    double want = Bf16Formula(c);
    float got = Bf16ToFloat(static_cast<uint16_t>(c));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << "code " << c;
      ASSERT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(got)))) << "code " << c;
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), want) << "code " << c;
    ASSERT_EQ(FloatToBf16(got), c) << "code " << c;
  }
}

TEST(Bf16Test, MatchesNearestOracleOnMillionFloats) {
  NearestOracle oracle(16, Bf16Formula, 0x7f80);
  size_t mismatches = 0;
  for (float x : InterestingFloats(oracle, kRandomSamples, 4)) {
    uint32_t want = oracle.Encode(x);
    uint32_t got = FloatToBf16(x);
    if (got != want && ++mismatches <= 10) ADD_FAILURE() << "x=" << x << " got " << got << " want " << want;
  }
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace tandem::engine
