// Every CPU matmul path against the double-precision oracle over awkward shapes, by normalised
// mean squared error with named tolerances. The error is normalised by the energy of the products
// (NMSE = Σ(y - ref)² / Σ_{i,n,k} (w[n][k]·x[i][k])²), which equals Σ ref² for uncorrelated data
// but does not blow up when one output happens to cancel to almost zero.
#include "engine/kernels/cpu/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/test_skip.h"
#include "engine/core/cpu_features.h"
#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/cpu_backend.h"
#include "engine/kernels/cpu/matmul_internal.h"
#include "engine/kernels/cpu/matmul_test_paths.h"

namespace tandem::engine::kernels::cpu {
namespace {

using testing_paths::AllPaths;
using testing_paths::kNmseFp32Accumulation;
using testing_paths::kNmseInt4Int16;
using testing_paths::kNmseInt4Int8;
using testing_paths::Path;
using testing_paths::Paths;

double Nmse(const std::vector<float>& got, const std::vector<float>& want, double energy) {
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
  }
  return energy > 0 ? err / energy : err;
}

// A weight in checkpoint layout with random contents, plus the storage it points into.
struct TestWeight {
  WeightFormat format;
  int64_t rows, cols;
  std::vector<uint16_t> bf16;
  std::vector<uint8_t> fp8;
  std::vector<float> fp8_scale;
  std::vector<int32_t> packed;
  std::vector<uint16_t> int4_scale;

  TestWeight(WeightFormat f, int64_t n, int64_t k, uint32_t seed) : format(f), rows(n), cols(k) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> gauss(0.0f, 0.05f);
    std::uniform_real_distribution<float> unit(0.5f, 1.5f);
    switch (f) {
      case WeightFormat::kBf16:
        bf16.resize(static_cast<size_t>(n * k));
        for (auto& v : bf16) v = FloatToBf16(gauss(rng));
        break;
      case WeightFormat::kFp8Block128:
        fp8.resize(static_cast<size_t>(n * k));
        for (auto& v : fp8) {
          do v = static_cast<uint8_t>(rng());
          while ((v & 0x7f) == 0x7f);
        }
        fp8_scale.resize(static_cast<size_t>(Fp8ScaleRows(n) * Fp8ScaleCols(k)));
        for (auto& s : fp8_scale) s = unit(rng) * 1e-3f;
        break;
      case WeightFormat::kInt4Group32:
        packed.resize(static_cast<size_t>(n * Int4PackedCols(k)));
        for (auto& v : packed) v = static_cast<int32_t>(rng());
        int4_scale.resize(static_cast<size_t>(n * Int4ScaleCols(k)));
        for (auto& s : int4_scale) s = FloatToBf16(unit(rng) * 0.01f);
        break;
    }
  }

  StatusOr<PackedWeight> Pack() const {
    switch (format) {
      case WeightFormat::kBf16: return PackedWeight::FromBf16({bf16.data(), rows, cols});
      case WeightFormat::kFp8Block128:
        return PackedWeight::FromFp8({fp8.data(), fp8_scale.data(), rows, cols});
      case WeightFormat::kInt4Group32:
        return PackedWeight::FromInt4({packed.data(), int4_scale.data(), rows, cols});
    }
    return Status::Internal("format");
  }

  // The dequantized weight, decoded independently of the kernels' packing.
  double At(int64_t n, int64_t k) const {
    switch (format) {
      case WeightFormat::kBf16: return Bf16ToFloat(bf16[static_cast<size_t>(n * cols + k)]);
      case WeightFormat::kFp8Block128:
        return static_cast<double>(Fp8E4M3ToFloat(fp8[static_cast<size_t>(n * cols + k)])) *
               fp8_scale[static_cast<size_t>((n / 128) * Fp8ScaleCols(cols) + k / 128)];
      case WeightFormat::kInt4Group32: {
        const uint32_t word =
            static_cast<uint32_t>(packed[static_cast<size_t>(n * Int4PackedCols(cols) + k / 8)]);
        const int q = static_cast<int>((word >> (4 * (k % 8))) & 0xf) - 8;
        return q * static_cast<double>(
                       Bf16ToFloat(int4_scale[static_cast<size_t>(n * Int4ScaleCols(cols) + k / 32)]));
      }
    }
    return 0;
  }

  // Σ_{i,n,k} (w[n][k] x[i][k])²: the normaliser of Nmse.
  double Energy(const float* x, int64_t m) const {
    double e = 0;
    for (int64_t n = 0; n < rows; ++n) {
      for (int64_t k = 0; k < cols; ++k) {
        const double w2 = At(n, k) * At(n, k);
        for (int64_t i = 0; i < m; ++i) e += w2 * x[i * cols + k] * x[i * cols + k];
      }
    }
    return e;
  }

  void Ref(const float* x, int64_t m, float* y) const {
    switch (format) {
      case WeightFormat::kBf16: MatmulRef(Bf16WeightView{bf16.data(), rows, cols}, x, m, y); break;
      case WeightFormat::kFp8Block128:
        MatmulRef(Fp8BlockWeightView{fp8.data(), fp8_scale.data(), rows, cols}, x, m, y);
        break;
      case WeightFormat::kInt4Group32:
        MatmulRef(Int4GroupWeightView{packed.data(), int4_scale.data(), rows, cols}, x, m, y);
        break;
    }
  }
};

std::vector<float> RandomActivations(int64_t m, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (auto& v : x) v = gauss(rng);
  return x;
}

TEST(MatmulIsaTest, EveryPathRunsHere) {
  std::string missing;
  for (const Path& p : AllPaths()) {
    if (std::string(MatmulIsa(p.options)) != p.isa) missing += std::string(" ") + p.name;
  }
  if (!missing.empty())
    TANDEM_SKIP_ISA_ABSENT() << "this CPU lacks the ISA of these paths, not tested here:" << missing;
}

void CheckAgainstRef(WeightFormat f, int64_t n, int64_t k, int64_t m, ThreadPool* pool) {
  TestWeight w(f, n, k, static_cast<uint32_t>(n * 131 + k * 7 + m));
  StatusOr<PackedWeight> packed = w.Pack();
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  std::vector<float> x = RandomActivations(m, k, static_cast<uint32_t>(k + m));
  std::vector<float> want(static_cast<size_t>(m * n));
  w.Ref(x.data(), m, want.data());
  const double energy = w.Energy(x.data(), m);
  for (const Path& path : Paths()) {
    // The FP8 decode variants run the same kernels as their ISA's default for other formats.
    if (f != WeightFormat::kFp8Block128 && std::string(path.name).find("_fp8_") != std::string::npos)
      continue;
    std::vector<float> got(want.size(), std::nanf(""));
    ASSERT_TRUE(Matmul(*packed, x.data(), m, got.data(), pool, path.options).ok());
    const double tol = f == WeightFormat::kInt4Group32 ? path.tolerance_int4 : kNmseFp32Accumulation;
    EXPECT_LE(Nmse(got, want, energy), tol) << "format " << WeightFormatName(f) << " path " << path.name
                                            << " N=" << n << " K=" << k << " m=" << m;
  }
}

class MatmulShapesTest : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(MatmulShapesTest, AwkwardShapesMatchReference) {
  ThreadPool pool(2);
  // K: below one vector, multiples of 16 / 32 / 64 but not of the next power, odd INT4 group
  // counts, partial last blocks of 8 groups; N: not a multiple of the 4 rows streamed together.
  for (int64_t n : {1, 17, 97, 130}) {
    for (int64_t k : {1, 17, 48, 96, 97, 128, 300, 320, 700}) {
      for (int64_t m : {1, 2, 3, 4, 5, 7, 13}) CheckAgainstRef(GetParam(), n, k, m, &pool);
    }
  }
}

TEST_P(MatmulShapesTest, EveryDecodeBatchMatchesReference) {
  ThreadPool pool(2);
  for (int64_t m = 1; m <= 16; ++m) CheckAgainstRef(GetParam(), 37, 333, m, &pool);
}

TEST_P(MatmulShapesTest, LargeDecodeShapeMatchesReference) {
  ThreadPool pool(2);
  CheckAgainstRef(GetParam(), 4096, 1000, 1, &pool);  // K not a multiple of 128
}

TEST_P(MatmulShapesTest, PrefillBatchMatchesReference) {
  ThreadPool pool(2);
  CheckAgainstRef(GetParam(), 96, 640, 64, &pool);
}

// The oracle backend's Linears (kernels/cpu/cpu_backend.h: exactly dequantized rows of the packed
// weight, double sums) are MatmulRef on the checkpoint layout: the packing loses nothing. Its
// batch runs every task the same way; bad arguments are errors, as with the kernels.
TEST_P(MatmulShapesTest, RefBackendIsMatmulRefOnThePackedWeight) {
  const RefBackend ref;
  for (int64_t n : {1, 17, 130}) {
    for (int64_t k : {17, 97, 300}) {
      for (int64_t m : {1, 5}) {
        TestWeight w(GetParam(), n, k, static_cast<uint32_t>(n * 1000 + k * 10 + m));
        const StatusOr<PackedWeight> packed = w.Pack();
        ASSERT_TRUE(packed.ok());
        const std::vector<float> x = RandomActivations(m, k, static_cast<uint32_t>(k + m));
        std::vector<float> want(static_cast<size_t>(m * n)), got(want.size(), std::nanf(""));
        w.Ref(x.data(), m, want.data());
        ASSERT_TRUE(ref.Matmul(*packed, x.data(), m, got.data()).ok());
        // fp8: a code times its block scale is rounded to fp32 once per element before the sum
        EXPECT_LE(Nmse(got, want, w.Energy(x.data(), m)), 1e-14) << "N=" << n << " K=" << k << " m=" << m;
        std::vector<float> batched(want.size(), std::nanf(""));
        const MatmulTask task[] = {{&*packed, x.data(), m, batched.data()}};
        ASSERT_TRUE(ref.MatmulBatch(task).ok());
        EXPECT_EQ(batched, got);
      }
    }
  }
  TestWeight w(GetParam(), 4, 32, 1);
  const PackedWeight packed = *w.Pack();
  float x[32] = {}, y[4];
  EXPECT_EQ(ref.Matmul(packed, x, 0, y).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ref.Matmul(packed, nullptr, 1, y).code(), StatusCode::kInvalidArgument);
  const MatmulTask null_weight[] = {{nullptr, x, 1, y}};
  EXPECT_EQ(ref.MatmulBatch(null_weight).code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(AllFormats, MatmulShapesTest,
                         ::testing::Values(WeightFormat::kBf16, WeightFormat::kFp8Block128,
                                           WeightFormat::kInt4Group32),
                         [](const auto& info) { return std::string(WeightFormatName(info.param)); });

// The SIMD paths (default INT4 activations) each ISA on this CPU runs, with each FP8 decode.
std::vector<Path> SimdPaths() {
  std::vector<Path> out;
  for (const Path& p : Paths()) {
    const std::string name = p.name;
    if (name == "avx512" || name == "avx2" || name.find("_fp8_") != std::string::npos) out.push_back(p);
  }
  return out;
}

TEST(MatmulTest, FullSizeExpertShapeBatchOne) {
  // The benchmark shape (Kimi's dense MLP scale): 4096 x 14336, every format, SIMD paths.
  ThreadPool pool(2);
  for (WeightFormat f : {WeightFormat::kBf16, WeightFormat::kFp8Block128, WeightFormat::kInt4Group32}) {
    TestWeight w(f, 4096, 14336, 5);
    StatusOr<PackedWeight> packed = w.Pack();
    ASSERT_TRUE(packed.ok());
    std::vector<float> x = RandomActivations(1, 14336, 9);
    std::vector<float> want(4096);
    w.Ref(x.data(), 1, want.data());
    const double energy = w.Energy(x.data(), 1);
    for (const Path& path : SimdPaths()) {
      std::vector<float> got(4096, std::nanf(""));
      ASSERT_TRUE(Matmul(*packed, x.data(), 1, got.data(), &pool, path.options).ok());
      EXPECT_LE(Nmse(got, want, energy),
                f == WeightFormat::kInt4Group32 ? kNmseInt4Int16 : kNmseFp32Accumulation)
          << WeightFormatName(f) << " path " << path.name;
    }
  }
}

// Every e4m3 code (subnormals included) decodes exactly on every SIMD path: row n holds code n in
// every column, so a one-hot activation picks one product, which must equal code n's value.
TEST(MatmulTest, Fp8EveryCodeDecodesExactly) {
  ThreadPool pool(1);
  const int64_t n = 256, k = 160;  // a partial second scale block
  std::vector<uint8_t> codes(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t code = (r & 0x7f) == 0x7f ? 0 : static_cast<uint8_t>(r);  // NaN codes are not weights
    std::fill_n(codes.begin() + r * k, k, code);
  }
  std::vector<float> scale(static_cast<size_t>(Fp8ScaleRows(n) * Fp8ScaleCols(k)), 1.0f);
  PackedWeight packed = *PackedWeight::FromFp8({codes.data(), scale.data(), n, k});
  for (int64_t hot : {3, 130}) {
    std::vector<float> x(static_cast<size_t>(k), 0.0f);
    x[static_cast<size_t>(hot)] = 1.0f;
    for (const Path& path : SimdPaths()) {
      std::vector<float> got(static_cast<size_t>(n), std::nanf(""));
      ASSERT_TRUE(Matmul(packed, x.data(), 1, got.data(), &pool, path.options).ok());
      for (int64_t r = 0; r < n; ++r) {
        ASSERT_EQ(got[static_cast<size_t>(r)], Fp8E4M3ToFloat(codes[static_cast<size_t>(r * k)]))
            << "code " << r << " column " << hot << " path " << path.name;
      }
    }
  }
}

TEST(MatmulTest, DecodeWeightRowIsTheDequantizedRow) {
  // Every format, on the portable path and the SIMD one, for rows whose length ends mid-step and
  // mid-scale-block: the bits of the Dequantize*Ref oracles. The FP8 weight holds every e4m3 code
  // but the NaNs, with block scales that make some products fp32 subnormal or large.
  const int64_t n = 130, k = 300;
  for (WeightFormat f : {WeightFormat::kBf16, WeightFormat::kFp8Block128, WeightFormat::kInt4Group32}) {
    TestWeight t(f, n, k, 17);
    if (f == WeightFormat::kFp8Block128) {
      for (size_t i = 0; i < t.fp8.size(); ++i) {
        t.fp8[i] = static_cast<uint8_t>(i * 7 + 3);
        if ((t.fp8[i] & 0x7f) == 0x7f) t.fp8[i] ^= 1;
      }
      t.fp8_scale = {1.7e-3f, 3.1e-38f, 2.5e5f, 0.37f, 1.0f, 6.0e-39f};  // [2, 3] blocks
    }
    const PackedWeight packed = *t.Pack();
    std::vector<float> want(static_cast<size_t>(n * k));
    switch (f) {
      case WeightFormat::kBf16: DequantizeBf16Ref({t.bf16.data(), n, k}, want.data()); break;
      case WeightFormat::kFp8Block128:
        DequantizeFp8Block128Ref({t.fp8.data(), t.fp8_scale.data(), n, k}, want.data());
        break;
      case WeightFormat::kInt4Group32:
        DequantizeInt4Group32Ref({t.packed.data(), t.int4_scale.data(), n, k}, want.data());
        break;
    }
    MatmulOptions portable;
    portable.force_portable = true;
    for (const MatmulOptions& options : {portable, MatmulOptions{}}) {
      for (int64_t r : {int64_t{0}, int64_t{1}, int64_t{127}, int64_t{128}, n - 1}) {
        std::vector<float> got(static_cast<size_t>(k), std::nanf(""));
        DecodeWeightRow(packed, r, got.data(), options);
        ASSERT_EQ(std::memcmp(got.data(), want.data() + r * k, sizeof(float) * k), 0)
            << WeightFormatName(f) << " row " << r << (options.force_portable ? " portable" : " simd");
      }
    }
  }
}

// The FP8 GEMV decodes weights as value · 2^-8 (through fp16) and pre-scales activations by 2^40,
// or (direct decode) as value · 2^-120 with activations pre-scaled by 2^90; neither tiny nor large
// activations may lose precision to underflow or overflow.
TEST(MatmulTest, Fp8ExtremeActivationScales) {
  ThreadPool pool(2);
  TestWeight w(WeightFormat::kFp8Block128, 64, 384, 11);
  PackedWeight packed = *w.Pack();
  for (float scale : {1e-8f, 1e-4f, 1.0f, 1e4f, 1e8f}) {
    std::vector<float> x = RandomActivations(1, 384, 12);
    for (float& v : x) v *= scale;
    std::vector<float> want(64);
    w.Ref(x.data(), 1, want.data());
    for (const Path& path : SimdPaths()) {
      std::vector<float> got(64, std::nanf(""));
      ASSERT_TRUE(Matmul(packed, x.data(), 1, got.data(), &pool, path.options).ok());
      EXPECT_LE(Nmse(got, want, w.Energy(x.data(), 1)), kNmseFp32Accumulation)
          << "activation scale " << scale << " path " << path.name;
    }
  }
}

// The AVX2 quantizer (natural order) gives the portable loop's bits: values, scales, corrections,
// for odd lengths, an all-zero group, tiny and huge magnitudes and exact halves (round half even).
TEST(MatmulTest, SimdNaturalOrderQuantizationIsThePortableLoopBitForBit) {
  if (HostKernelIsa() == KernelIsa::kPortable) TANDEM_SKIP_ISA_ABSENT() << "no AVX2 on this CPU";
  const int64_t m = 3, cols = 333;
  std::vector<float> x = RandomActivations(m, cols, 31);
  for (int64_t k = 64; k < 96; ++k) x[static_cast<size_t>(k)] = 0.0f;  // an all-zero group
  for (int64_t k = 96; k < 128; ++k) x[static_cast<size_t>(k)] *= 1e-30f;
  for (int64_t k = 128; k < 160; ++k) x[static_cast<size_t>(k)] *= 1e30f;
  x[200] = 0.5f, x[201] = -1.5f, x[202] = 2.5f, x[203] = 4.0f;  // halves once scaled by 127 / 4 steps
  struct Restore {
    KernelIsa before = KernelIsaCeiling();
    ~Restore() { SetKernelIsaCeiling(before); }
  } restore;
  for (Int4Activation kind : {Int4Activation::kInt16, Int4Activation::kInt8}) {
    QuantizedActivations simd, portable;
    SetKernelIsaCeiling(KernelIsa::kAvx2);
    QuantizeActivations(x.data(), m, cols, kind, &simd, ActivationOrder::kNatural);
    SetKernelIsaCeiling(KernelIsa::kPortable);
    QuantizeActivations(x.data(), m, cols, kind, &portable, ActivationOrder::kNatural);
    SetKernelIsaCeiling(restore.before);
    EXPECT_EQ(simd.q16, portable.q16);
    EXPECT_EQ(simd.q8, portable.q8);
    ASSERT_EQ(simd.scale.size(), portable.scale.size());
    EXPECT_EQ(std::memcmp(simd.scale.data(), portable.scale.data(), simd.scale.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(simd.corr.data(), portable.corr.data(), simd.corr.size() * sizeof(float)), 0);
  }
}

// The pair order the AVX-512 INT4 kernels read holds the same quantized values, scales and
// corrections as the natural order (bit for bit: with AVX-512 it is filled by vector code), each
// element where ActivationOrder documents it, zeros elsewhere.
TEST(MatmulTest, PairOrderActivationsMatchNaturalOrder) {
  const int64_t m = 3, cols = 300, groups = 10;  // a partial last group; 10 groups pad to 16
  std::vector<float> x = RandomActivations(m, cols, 21);
  x[5] = 0.0f;
  for (int64_t k = 32; k < 64; ++k) x[static_cast<size_t>(k)] = 0.0f;  // an all-zero group
  for (Int4Activation kind : {Int4Activation::kInt16, Int4Activation::kInt8}) {
    QuantizedActivations natural, pairs;
    QuantizeActivations(x.data(), m, cols, kind, &natural, ActivationOrder::kNatural);
    QuantizeActivations(x.data(), m, cols, kind, &pairs, ActivationOrder::kPairs);
    ASSERT_EQ(natural.row_elements, groups * 32);
    ASSERT_EQ(pairs.row_elements, 16 * 32);
    EXPECT_EQ(natural.scale, pairs.scale);
    EXPECT_EQ(natural.corr, pairs.corr);
    const bool i16 = kind == Int4Activation::kInt16;
    auto q = [&](const QuantizedActivations& a, int64_t at) {
      return i16 ? a.q16[static_cast<size_t>(at)] : a.q8[static_cast<size_t>(at)];
    };
    int64_t nonzero_natural = 0, nonzero_pairs = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t k = 0; k < cols; ++k) {
        const int64_t g = k / 32, e = k % 32;
        const int64_t at = (g / 2) * 64 + (e < 16 ? 0 : 32) + (g % 2) * 16 + e % 16;
        ASSERT_EQ(q(natural, i * natural.row_elements + k), q(pairs, i * pairs.row_elements + at))
            << "row " << i << " element " << k;
      }
      for (int64_t at = 0; at < natural.row_elements; ++at)
        nonzero_natural += q(natural, i * natural.row_elements + at) != 0;
      for (int64_t at = 0; at < pairs.row_elements; ++at)
        nonzero_pairs += q(pairs, i * pairs.row_elements + at) != 0;
    }
    EXPECT_EQ(nonzero_natural, nonzero_pairs);
    EXPECT_GT(nonzero_natural, m * (cols - 40) * 9 / 10);
  }
}

TEST(MatmulTest, Bf16ActivationsEqualWidenedFp32) {
  ThreadPool pool(1);
  TestWeight w(WeightFormat::kFp8Block128, 33, 257, 3);
  PackedWeight packed = *w.Pack();
  std::vector<float> x = RandomActivations(2, 257, 4);
  std::vector<uint16_t> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    xb[i] = FloatToBf16(x[i]);
    x[i] = Bf16ToFloat(xb[i]);
  }
  std::vector<float> a(66), b(66);
  ASSERT_TRUE(Matmul(packed, x.data(), 2, a.data(), &pool).ok());
  ASSERT_TRUE(MatmulBf16(packed, xb.data(), 2, b.data(), &pool).ok());
  EXPECT_EQ(a, b);
}

TEST(MatmulTest, BadArgumentsAreErrors) {
  ThreadPool pool(1);
  TestWeight w(WeightFormat::kBf16, 4, 4, 1);
  PackedWeight packed = *w.Pack();
  float x[4] = {}, y[4];
  EXPECT_EQ(Matmul(packed, x, 0, y, &pool).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PackedWeight::FromBf16({nullptr, 4, 4}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PackedWeight::FromInt4({nullptr, nullptr, 0, 32}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::engine::kernels::cpu
