#include "engine/formats/weights.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/base64.h"
#include "engine/formats/float_codecs.h"

namespace tandem::engine {
namespace {

// ---- goldens from compressed-tensors (scripts/gen_int4_goldens.py) ---------------------------

// Little-endian array of T, as the generator writes it (the test hosts are little-endian).
template <typename T>
std::vector<T> DecodeArray(const nlohmann::json& field) {
  std::string bytes;
  if (!Base64Decode(field.get<std::string>(), &bytes, Base64Mode::kStrict))
    ADD_FAILURE() << "bad base64 in goldens";
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

nlohmann::json LoadGoldens() {
  std::ifstream in(std::string(TANDEM_TESTDATA_DIR) + "/int4_goldens.json");
  EXPECT_TRUE(in.good()) << "missing " << TANDEM_TESTDATA_DIR << "/int4_goldens.json";
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

TEST(Int4GoldenTest, FileNamesTheLibraryItWasMadeWith) {
  const nlohmann::json doc = LoadGoldens();
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["library"], "compressed-tensors 0.20.1");
  EXPECT_EQ(doc["scheme"]["num_bits"], 4);
  EXPECT_EQ(doc["scheme"]["group_size"], 32);
  EXPECT_EQ(doc["scheme"]["symmetric"], true);
  EXPECT_GE(doc["cases"].size(), 8u);
}

TEST(Int4GoldenTest, QuantizerMatchesCompressedTensorsBitForBit) {
  const nlohmann::json doc = LoadGoldens();
  ASSERT_FALSE(doc.is_discarded());
  for (const nlohmann::json& c : doc["cases"]) {
    const std::string name = c["name"];
    const int64_t rows = c["rows"], cols = c["cols"];
    const std::vector<uint16_t> input = DecodeArray<uint16_t>(c["input"]);
    const std::vector<int32_t> want_packed = DecodeArray<int32_t>(c["packed"]);
    const std::vector<uint16_t> want_scale = DecodeArray<uint16_t>(c["scale"]);
    ASSERT_EQ(input.size(), static_cast<size_t>(rows * cols)) << name;
    ASSERT_EQ(want_packed.size(), static_cast<size_t>(rows * Int4PackedCols(cols))) << name;
    ASSERT_EQ(want_scale.size(), static_cast<size_t>(rows * Int4ScaleCols(cols))) << name;

    std::vector<float> w(input.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = Bf16ToFloat(input[i]);
    std::vector<int32_t> packed(want_packed.size());
    std::vector<uint16_t> scale(want_scale.size());
    QuantizeInt4Group32Ref(w.data(), rows, cols, packed.data(), scale.data());
    for (size_t i = 0; i < scale.size(); ++i) ASSERT_EQ(scale[i], want_scale[i]) << name << " scale " << i;
    for (size_t i = 0; i < packed.size(); ++i) {
      ASSERT_EQ(static_cast<uint32_t>(packed[i]), static_cast<uint32_t>(want_packed[i]))
          << name << " word " << i;
    }

    // The library's decompress is bf16(q * scale); ours is the exact fp32 product.
    if (c.contains("dequant")) {
      const std::vector<uint16_t> want = DecodeArray<uint16_t>(c["dequant"]);
      std::vector<float> out(w.size());
      DequantizeInt4Group32Ref({packed.data(), scale.data(), rows, cols}, out.data());
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_EQ(FloatToBf16(out[i]), want[i]) << name << " dequant " << i;
      }
    }

    // What the library refuses to quantize, a checkpoint cannot hold.
    const Status shapes =
        ValidateInt4Shapes(rows, cols, rows, Int4PackedCols(cols), rows, Int4ScaleCols(cols));
    EXPECT_EQ(shapes.ok(), c["library_accepts"].get<bool>()) << name << ": " << shapes.ToString();
  }
}

// ---- INT4 hand-computed -----------------------------------------------------------------------

std::vector<float> Group(std::vector<float> head) {
  head.resize(kInt4GroupSize, 0.0f);
  return head;
}

TEST(Int4RefTest, HandComputedScaleOne) {
  // amax 7.5 -> scale 1; q = rint-half-even(clamp(w, -8, 7)) = 7 -8 2 4 -2 0 0 2, then 0s, 1s.
  std::vector<float> w = Group({7.5f, -7.5f, 2.5f, 3.5f, -2.5f, 0.5f, -0.5f, 1.5f});
  for (int i = 16; i < 32; ++i) w[i] = 1.0f;
  int32_t packed[4];
  uint16_t scale;
  QuantizeInt4Group32Ref(w.data(), 1, 32, packed, &scale);
  EXPECT_EQ(scale, 0x3f80);  // 1.0
  // Nibble j of word 0 is q[j] + 8: F 0 A C 6 8 8 A, little nibble first.
  EXPECT_EQ(static_cast<uint32_t>(packed[0]), 0xA886CA0Fu);
  EXPECT_EQ(static_cast<uint32_t>(packed[1]), 0x88888888u);
  EXPECT_EQ(static_cast<uint32_t>(packed[2]), 0x99999999u);
  EXPECT_EQ(static_cast<uint32_t>(packed[3]), 0x99999999u);
}

TEST(Int4RefTest, HandComputedQuotientIsRoundedToBf16First) {
  // amax 3 -> scale = bf16(3 / 7.5) = bf16(0.4) = 0x3ECD = 0.400390625.
  // 1.3984375 / scale = 3.4927 -> bf16 3.5 -> 4 (an fp32 quotient would give 3);
  // +-3 / scale = +-7.4927 -> bf16 +-7.5 -> 7 (clamped) and -8 (half to even); 0.2 -> 0.5 -> 0.
  const std::vector<float> w = Group({3.0f, -3.0f, 1.3984375f, 0.2f, -1.3984375f});
  int32_t packed[4];
  uint16_t scale;
  QuantizeInt4Group32Ref(w.data(), 1, 32, packed, &scale);
  EXPECT_EQ(scale, 0x3ecd);
  EXPECT_EQ(static_cast<uint32_t>(packed[0]), 0x88848C0Fu);  // q = 7 -8 4 0 -4 0 0 0
  for (int i = 1; i < 4; ++i) EXPECT_EQ(static_cast<uint32_t>(packed[i]), 0x88888888u);
}

TEST(Int4RefTest, ZeroGroupGetsBf16EpsilonScale) {
  const std::vector<float> w(kInt4GroupSize, 0.0f);
  int32_t packed[4];
  uint16_t scale;
  QuantizeInt4Group32Ref(w.data(), 1, 32, packed, &scale);
  EXPECT_EQ(scale, 0x3c00);  // 2^-7 = torch.finfo(torch.bfloat16).eps
  for (int32_t word : packed) EXPECT_EQ(static_cast<uint32_t>(word), 0x88888888u);
}

TEST(Int4RefTest, TailWordIsPaddedWithZeroNibbles) {
  const std::vector<int8_t> q = {-8, -1, 0, 7, 3, -3, 1, 2, 5, -7, 6};  // 11 values: 2 words
  int32_t packed[2];
  PackInt4Ref(q.data(), 1, static_cast<int64_t>(q.size()), packed);
  EXPECT_EQ(static_cast<uint32_t>(packed[0]), 0xA95BF870u);
  EXPECT_EQ(static_cast<uint32_t>(packed[1]), 0x0000E1Du);
}

TEST(Int4RefTest, UnpackInvertsPack) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> dist(-8, 7);
  for (int64_t cols : {1, 7, 8, 9, 31, 32, 33, 40, 100}) {
    const int64_t rows = 3;
    std::vector<int8_t> q(rows * cols), back(rows * cols);
    for (auto& v : q) v = static_cast<int8_t>(dist(rng));
    std::vector<int32_t> packed(rows * Int4PackedCols(cols));
    PackInt4Ref(q.data(), rows, cols, packed.data());
    UnpackInt4Ref(packed.data(), rows, cols, back.data());
    EXPECT_EQ(back, q) << "cols=" << cols;
  }
}

TEST(Int4RefTest, RoundTripErrorIsAtMostHalfAStep) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (int64_t cols : {32, 64, 40, 7, 300}) {
    const int64_t rows = 17;
    std::vector<float> w(rows * cols);
    for (auto& v : w) v = Bf16ToFloat(FloatToBf16(dist(rng)));
    std::vector<int32_t> packed(rows * Int4PackedCols(cols));
    std::vector<uint16_t> scale(rows * Int4ScaleCols(cols));
    QuantizeInt4Group32Ref(w.data(), rows, cols, packed.data(), scale.data());
    std::vector<float> out(w.size());
    DequantizeInt4Group32Ref({packed.data(), scale.data(), rows, cols}, out.data());
    for (int64_t n = 0; n < rows; ++n) {
      for (int64_t k = 0; k < cols; ++k) {
        const float step = Bf16ToFloat(scale[n * Int4ScaleCols(cols) + k / kInt4GroupSize]);
        // Half a step, plus the bf16 rounding of the quotient (at most 1/32 of a step near 8).
        ASSERT_LE(std::fabs(out[n * cols + k] - w[n * cols + k]), (0.5f + 1.0f / 32) * step)
            << "cols=" << cols << " n=" << n << " k=" << k;
      }
    }
  }
}

// ---- FP8 block 128 ----------------------------------------------------------------------------

// Independent of float_codecs.h: the nearest finite e4m3 value by search over all codes, ties to
// the even code, beyond 448 saturating.
uint8_t NearestE4M3(float y) {
  static const std::vector<double> kValues = [] {
    std::vector<double> v(0x7f);
    for (int c = 0; c < 0x7f; ++c) {
      const int exp = c >> 3, mant = c & 7;
      v[c] = exp == 0 ? std::ldexp(mant, -9) : std::ldexp(8 + mant, exp - 10);
    }
    return v;
  }();
  const double a = std::fabs(static_cast<double>(y));
  int best = 0;
  for (int c = 1; c < 0x7f; ++c) {
    const double d = std::fabs(kValues[c] - a), best_d = std::fabs(kValues[best] - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) best = c;
  }
  return static_cast<uint8_t>((std::signbit(y) ? 0x80 : 0) | best);
}

// The rule written out separately: per block amax floored at 1e-4, scale = amax / 448, codes of
// w / scale. Blocks are walked column-major to differ from the reference's loop order.
void Fp8BlockIndependent(const std::vector<float>& w, int64_t rows, int64_t cols, std::vector<uint8_t>& data,
                         std::vector<float>& scale_inv) {
  const int64_t sr = (rows + 127) / 128, sc = (cols + 127) / 128;
  std::vector<float> amax(sr * sc, 0.0f);
  for (int64_t k = 0; k < cols; ++k) {
    for (int64_t n = 0; n < rows; ++n) {
      float& m = amax[(n / 128) * sc + k / 128];
      m = std::max(m, std::fabs(w[n * cols + k]));
    }
  }
  scale_inv.resize(amax.size());
  for (size_t b = 0; b < amax.size(); ++b) scale_inv[b] = std::max(amax[b], 1e-4f) / 448.0f;
  data.resize(w.size());
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t k = 0; k < cols; ++k) {
      data[n * cols + k] = NearestE4M3(w[n * cols + k] / scale_inv[(n / 128) * sc + k / 128]);
    }
  }
}

std::vector<float> RandomWeights(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w(rows * cols);
  // Row magnitudes vary, so blocks get different scales.
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t k = 0; k < cols; ++k) w[n * cols + k] = dist(rng) * 0.01f * static_cast<float>(1 + n % 7);
  }
  return w;
}

struct Fp8Result {
  std::vector<uint8_t> data;
  std::vector<float> scale_inv;
  std::vector<float> out;
};

Fp8Result Fp8RoundTrip(const std::vector<float>& w, int64_t rows, int64_t cols) {
  Fp8Result r;
  r.data.resize(w.size());
  r.scale_inv.resize(Fp8ScaleRows(rows) * Fp8ScaleCols(cols));
  QuantizeFp8Block128Ref(w.data(), rows, cols, r.data.data(), r.scale_inv.data());
  r.out.resize(w.size());
  DequantizeFp8Block128Ref({r.data.data(), r.scale_inv.data(), rows, cols}, r.out.data());
  return r;
}

double RelativeFrobeniusError(const std::vector<float>& want, const std::vector<float>& got) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(err / norm);
}

// e4m3 keeps 3 mantissa bits: at most 2^-4 relative error per normal element; 1.5-3% measured.
constexpr double kFp8RelFrobeniusTol = 0.04;
constexpr int64_t kAwkwardSizes[] = {1, 17, 97, 128, 129, 300};

TEST(Fp8BlockRefTest, MatchesIndependentImplementationOnAwkwardShapes) {
  for (int64_t rows : kAwkwardSizes) {
    for (int64_t cols : kAwkwardSizes) {
      const std::vector<float> w = RandomWeights(rows, cols, static_cast<uint32_t>(rows * 1000 + cols));
      const Fp8Result r = Fp8RoundTrip(w, rows, cols);
      std::vector<uint8_t> want_data;
      std::vector<float> want_scale;
      Fp8BlockIndependent(w, rows, cols, want_data, want_scale);
      ASSERT_EQ(r.scale_inv, want_scale) << rows << "x" << cols;
      for (size_t i = 0; i < w.size(); ++i) {
        ASSERT_EQ(r.data[i], want_data[i]) << rows << "x" << cols << " i=" << i << " w=" << w[i];
      }
      EXPECT_LT(RelativeFrobeniusError(w, r.out), kFp8RelFrobeniusTol) << rows << "x" << cols;
    }
  }
}

TEST(Fp8BlockRefTest, BlockMaximumMapsTo448WithoutOverflow) {
  // amax / (amax / 448) can round above 448; it must saturate to 0x7E, never become NaN (0x7F).
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(1e-3f, 1e3f);
  for (int trial = 0; trial < 2000; ++trial) {
    const float amax = dist(rng);
    std::vector<float> w = {amax, -amax, amax * 0.5f, 0.0f};
    uint8_t data[4];
    float scale_inv;
    QuantizeFp8Block128Ref(w.data(), 1, 4, data, &scale_inv);
    ASSERT_EQ(data[0], 0x7e) << amax;
    ASSERT_EQ(data[1], 0xfe) << amax;
    ASSERT_NEAR(Fp8E4M3ToFloat(data[0]) * scale_inv, amax, amax * 1e-6f);
  }
}

TEST(Fp8BlockRefTest, ZeroBlocksGetAPositiveScaleAndDecodeToZero) {
  const int64_t rows = 129, cols = 300;
  std::vector<float> w = RandomWeights(rows, cols, 5);
  for (int64_t n = 0; n < 128; ++n) {
    for (int64_t k = 128; k < 256; ++k) w[n * cols + k] = 0.0f;  // block (0, 1) all zero
  }
  for (int64_t k = 0; k < cols; ++k) w[128 * cols + k] = 0.0f;  // the whole last block row
  const Fp8Result r = Fp8RoundTrip(w, rows, cols);
  const float floor_scale = 1e-4f / 448.0f;
  EXPECT_EQ(r.scale_inv[1], floor_scale);
  for (int64_t bc = 0; bc < 3; ++bc) EXPECT_EQ(r.scale_inv[3 + bc], floor_scale);
  for (size_t i = 0; i < w.size(); ++i) {
    ASSERT_FALSE(std::isnan(r.out[i]));
    if (w[i] == 0.0f) {
      ASSERT_EQ(r.out[i], 0.0f) << i;
    }
  }
}

TEST(Fp8BlockRefTest, TinyBlocksUseTheFloor) {
  // Below 1e-4 the scale stops shrinking: values keep their size relative to 1e-4 (subnormal codes).
  const std::vector<float> w = {1e-6f, -2e-5f, 1e-4f};
  uint8_t data[3];
  float scale_inv;
  QuantizeFp8Block128Ref(w.data(), 1, 3, data, &scale_inv);
  EXPECT_EQ(scale_inv, 1e-4f / 448.0f);
  EXPECT_EQ(data[0], FloatToFp8E4M3(1e-6f / scale_inv));
  EXPECT_EQ(data[1], FloatToFp8E4M3(-2e-5f / scale_inv));
  EXPECT_EQ(data[2], 0x7e);
}

TEST(Fp8BlockRefTest, DequantizeAppliesEachBlocksScale) {
  const int64_t rows = 130, cols = 129;
  std::vector<uint8_t> data(rows * cols, 0x38);  // 1.0
  const std::vector<float> scale_inv = {1.0f, 2.0f, 3.0f, 4.0f};
  std::vector<float> out(data.size());
  DequantizeFp8Block128Ref({data.data(), scale_inv.data(), rows, cols}, out.data());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[127 * cols + 128], 2.0f);
  EXPECT_EQ(out[128 * cols + 127], 3.0f);
  EXPECT_EQ(out[129 * cols + 128], 4.0f);
}

// ---- shape validation ---------------------------------------------------------------------------

TEST(WeightShapesTest, Int4) {
  EXPECT_TRUE(ValidateInt4Shapes(4096, 7168, 4096, 896, 4096, 224).ok());
  EXPECT_FALSE(ValidateInt4Shapes(4096, 7168, 4096, 897, 4096, 224).ok());
  EXPECT_FALSE(ValidateInt4Shapes(4096, 7168, 4095, 896, 4096, 224).ok());
  EXPECT_FALSE(ValidateInt4Shapes(4096, 7168, 4096, 896, 4096, 225).ok());
  EXPECT_FALSE(ValidateInt4Shapes(4096, 7168, 4096, 896, 1, 224).ok());
  const Status not_grouped = ValidateInt4Shapes(8, 40, 8, 5, 8, 2);
  EXPECT_EQ(not_grouped.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(not_grouped.message().find("multiple of the group size"), std::string::npos);
  EXPECT_FALSE(ValidateInt4Shapes(0, 32, 0, 4, 0, 1).ok());
  EXPECT_FALSE(ValidateInt4Shapes(-1, 32, -1, 4, -1, 1).ok());
}

TEST(WeightShapesTest, Fp8) {
  EXPECT_TRUE(ValidateFp8Shapes(7168, 2048, 56, 16).ok());
  EXPECT_TRUE(ValidateFp8Shapes(129, 300, 2, 3).ok());
  EXPECT_TRUE(ValidateFp8Shapes(1, 1, 1, 1).ok());
  const Status bad = ValidateFp8Shapes(129, 300, 1, 3);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("[2, 3]"), std::string::npos) << bad.ToString();
  EXPECT_FALSE(ValidateFp8Shapes(129, 300, 2, 2).ok());
  EXPECT_FALSE(ValidateFp8Shapes(0, 300, 0, 3).ok());
  EXPECT_FALSE(ValidateFp8Shapes(int64_t{1} << 40, 128, int64_t{1} << 33, 1).ok());
}

TEST(Bf16RefTest, DequantizeIsTheUpperHalfOfFloat) {
  const std::vector<uint16_t> data = {0x3f80, 0xc000, 0x0000, 0x8000, 0x3ecd, 0x7f7f};
  std::vector<float> out(data.size());
  DequantizeBf16Ref({data.data(), 2, 3}, out.data());
  for (size_t i = 0; i < data.size(); ++i) EXPECT_EQ(FloatBits(out[i]), static_cast<uint32_t>(data[i]) << 16);
}

}  // namespace
}  // namespace tandem::engine
