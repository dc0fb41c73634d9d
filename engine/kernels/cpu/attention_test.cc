// The attention kernels (attention.h) against their double oracles, in every variant this host
// runs: scores within fp32 rounding and batch-invariant, weighted sums bit-equal to the portable
// loop and page-by-page equal to one call, both row formats, odd sizes, poisoned outputs.
#include "engine/kernels/cpu/attention.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/test_skip.h"
#include "engine/core/cpu_features.h"
#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/isa_test_support.h"

namespace tandem::engine::kernels::cpu {
namespace {

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();
// Scores: fp32 accumulation of at most 576 terms against the double oracle.
constexpr double kNmseScores = 1e-12;

// Random rows in `format` with magnitudes like a cache's (e4m3 codes drawn over every finite code).
struct Rows {
  std::vector<uint16_t> bf16;
  std::vector<uint8_t> fp8;
  RowFormat format;
  int64_t stride;
  RowsRef Ref(int64_t first_row = 0) const {
    if (format == RowFormat::kBf16) return {bf16.data() + first_row * stride, format, stride};
    return {fp8.data() + first_row * stride, format, stride};
  }
};

Rows MakeRows(RowFormat format, int64_t n, int64_t stride, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.5f);
  Rows r{{}, {}, format, stride};
  if (format == RowFormat::kBf16) {
    r.bf16.resize(n * stride);
    for (uint16_t& v : r.bf16) v = FloatToBf16(gauss(rng));
  } else {
    r.fp8.resize(n * stride);
    std::uniform_int_distribution<int> code(0, 255);
    for (uint8_t& v : r.fp8) {
      do v = static_cast<uint8_t>(code(rng));
      while ((v & 0x7f) == 0x7f);  // never written by a pool
    }
  }
  return r;
}

const char* Name(RowFormat f) { return f == RowFormat::kBf16 ? "bf16" : "fp8_e4m3"; }

TEST(AttentionKernelsTest, EveryVariantRunsHere) {
  std::string missing;
  if (HostKernelIsa() < KernelIsa::kAvx2) missing += " avx2";
  if (HostKernelIsa() < KernelIsa::kAvx512) missing += " avx512";
  if (!missing.empty()) TANDEM_SKIP_ISA_ABSENT() << "this CPU lacks these attention variants:" << missing;
}

TEST(AttentionKernelsTest, Fp8RowsDecodeEveryCodeExactly) {
  // Query e_d against a row holding every code: each score is that code's value exactly, in
  // every variant; sums with weight 1 likewise.
  std::vector<uint8_t> codes;
  for (int c = 0; c < 256; ++c)
    if ((c & 0x7f) != 0x7f) codes.push_back(static_cast<uint8_t>(c));
  const int64_t width = static_cast<int64_t>(codes.size());
  ForEachKernelIsa([&](KernelIsa isa) {
    ASSERT_STREQ(AttentionIsa(), KernelIsaName(isa));
    std::vector<float> q(width, 0.0f), score(1), sum(width, 0.0f);
    const float one = 1.0f;
    const RowsRef rows{codes.data(), RowFormat::kFp8E4M3, width};
    AttentionWeightedSums(&one, 1, 1, rows, 1, width, sum.data(), width);
    for (int64_t d = 0; d < width; ++d) {
      const float want = Fp8E4M3ToFloat(codes[d]);
      ASSERT_EQ(RowValue(rows, 0, d), want);
      q.assign(width, 0.0f);
      q[d] = 1.0f;
      AttentionScores(q.data(), 1, width, rows, 1, width, score.data(), 1);
      ASSERT_EQ(score[0], want) << KernelIsaName(isa) << " code " << int{codes[d]};
      ASSERT_EQ(sum[d], want) << KernelIsaName(isa) << " code " << int{codes[d]};
    }
  });
}

TEST(AttentionKernelsTest, ScoresMatchTheOracleAndDoNotDependOnTheBatch) {
  // Odd widths around the 8- and 16-lane chunks and the real 576; 1, 17 and 97 rows with a stride
  // wider than the row; 1..5 queries; outputs poisoned around what is written.
  for (RowFormat format : {RowFormat::kBf16, RowFormat::kFp8E4M3}) {
    for (int64_t width : {1, 7, 15, 16, 17, 97, 576}) {
      for (int64_t n : {1, 17, 97}) {
        const int64_t stride = width + 5, nq = 5, out_stride = n + 3;
        const Rows rows = MakeRows(format, n, stride, static_cast<uint32_t>(width * 131 + n));
        const std::vector<float> q = Gauss(nq * width, static_cast<uint32_t>(width + 7 * n));
        std::vector<float> want(nq * out_stride, kPoison);
        AttentionScoresRef(q.data(), nq, width, rows.Ref(), n, width, want.data(), out_stride);
        ForEachKernelIsa([&](KernelIsa isa) {
          ASSERT_STREQ(AttentionIsa(), KernelIsaName(isa));
          const std::string where = std::string(Name(format)) + " " + KernelIsaName(isa) + " width " +
                                    std::to_string(width) + " rows " + std::to_string(n);
          std::vector<float> got(nq * out_stride, kPoison);
          AttentionScores(q.data(), nq, width, rows.Ref(), n, width, got.data(), out_stride);
          EXPECT_LE(Nmse(got, want), kNmseScores) << where;
          for (int64_t h = 0; h < nq; ++h) {
            for (int64_t j = 0; j < out_stride; ++j) {
              const float v = got[h * out_stride + j];
              if (j >= n) {
                ASSERT_TRUE(std::isnan(v)) << where << ": written past n";
                continue;
              }
              double magnitude = 0;
              for (int64_t d = 0; d < width; ++d)
                magnitude += std::fabs(static_cast<double>(q[h * width + d]) * RowValue(rows.Ref(), j, d));
              ASSERT_LE(std::fabs(v - want[h * out_stride + j]),
                        width * std::ldexp(1.0, -24) * magnitude + 1e-30)
                  << where;
              float alone;  // the same pair computed alone: one query, one row
              AttentionScores(q.data() + h * width, 1, width, rows.Ref(j), 1, width, &alone, 1);
              ASSERT_EQ(std::memcmp(&alone, &v, sizeof(float)), 0) << where << " query " << h << " row " << j;
            }
          }
        });
      }
    }
  }
}

TEST(AttentionKernelsTest, WeightedSumsArePortableBitsPageByPage) {
  // 1..6 weight vectors (groups of up to 4), some weights 0, dims around the vector passes, rows
  // in pages of 1, 16 and 64 (the last one short): every variant, called page after page, gives the
  // portable loop's bits of one call over all rows, within the oracle's NMSE, nothing written
  // past dim.
  const int64_t n = 97, stride = 580, max_nw = 6;
  std::vector<float> w = Gauss(max_nw * n, 11, 0.2f);
  for (size_t i = 0; i < w.size(); ++i)
    if (i % 6 == 1 || i % 11 == 4) w[i] = 0.0f;
  for (RowFormat format : {RowFormat::kBf16, RowFormat::kFp8E4M3}) {
    const Rows rows = MakeRows(format, n, stride, 5);
    for (int64_t nw : {1, 3, 4, 6}) {
      for (int64_t dim : {1, 15, 17, 33, 97, 129, 512, 576}) {
        const int64_t out_stride = dim + 3;
        const std::vector<float> start = Gauss(nw * out_stride, static_cast<uint32_t>(dim));
        std::vector<float> want = start;
        AttentionWeightedSumsRef(w.data(), nw, n, rows.Ref(), n, dim, want.data(), out_stride);
        std::vector<float> portable;
        ForEachKernelIsa([&](KernelIsa isa) {
          ASSERT_STREQ(AttentionIsa(), KernelIsaName(isa));
          for (int64_t page : {1, 16, 64}) {
            const std::string where = std::string(Name(format)) + " " + KernelIsaName(isa) + " nw " +
                                      std::to_string(nw) + " dim " + std::to_string(dim) + " page " +
                                      std::to_string(page);
            std::vector<float> got = start;
            for (int64_t h = 0; h < nw; ++h)
              for (int64_t d = dim; d < out_stride; ++d) got[h * out_stride + d] = kPoison;
            for (int64_t first = 0; first < n; first += page) {
              AttentionWeightedSums(w.data() + first, nw, n, rows.Ref(first), std::min(page, n - first), dim,
                                    got.data(), out_stride);
            }
            for (int64_t h = 0; h < nw; ++h)
              for (int64_t d = dim; d < out_stride; ++d)
                ASSERT_TRUE(std::isnan(got[h * out_stride + d])) << where << ": written past dim";
            for (int64_t h = 0; h < nw; ++h)
              for (int64_t d = dim; d < out_stride; ++d) got[h * out_stride + d] = want[h * out_stride + d];
            EXPECT_LE(Nmse(got, want), 1e-12) << where;
            if (portable.empty()) portable = got;  // the portable variant, first page size
            ASSERT_EQ(std::memcmp(got.data(), portable.data(), got.size() * sizeof(float)), 0) << where;
          }
        });
      }
    }
  }
}

TEST(AttentionKernelsTest, Fp8RowsWidenedToBf16GiveTheSameBits) {
  // What the decode does for FP8 blocks read by more than 4 heads: widen once (every variant's
  // conversion exact, odd widths included), then the bf16 kernels, which must give the FP8
  // kernels' bits (scores and sums), in every variant.
  for (int64_t w_odd : {1, 17, 97}) {
    const Rows odd = MakeRows(RowFormat::kFp8E4M3, 3, w_odd + 2, static_cast<uint32_t>(w_odd));
    ForEachKernelIsa([&](KernelIsa isa) {
      ASSERT_STREQ(AttentionIsa(), KernelIsaName(isa));
      std::vector<uint16_t> out(3 * w_odd + 1, 0xdead);
      Fp8RowsToBf16(odd.Ref(), 3, w_odd, out.data());
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t d = 0; d < w_odd; ++d)
          ASSERT_EQ(Bf16ToFloat(out[j * w_odd + d]), RowValue(odd.Ref(), j, d)) << KernelIsaName(isa);
      ASSERT_EQ(out.back(), 0xdead) << KernelIsaName(isa) << ": written past n rows";
    });
  }
  const int64_t n = 37, width = 576, stride = 600, nq = 9, lora = 512;
  const Rows rows = MakeRows(RowFormat::kFp8E4M3, n, stride, 21);
  const std::vector<float> q = Gauss(nq * width, 3);
  std::vector<float> w = Gauss(nq * n, 4, 0.3f);
  w[5] = 0.0f;
  ForEachKernelIsa([&](KernelIsa isa) {
    ASSERT_STREQ(AttentionIsa(), KernelIsaName(isa));
    std::vector<uint16_t> widened(n * width);
    Fp8RowsToBf16(rows.Ref(), n, width, widened.data());
    const RowsRef bf16{widened.data(), RowFormat::kBf16, width};
    for (int64_t j = 0; j < n; ++j)
      for (int64_t d = 0; d < width; ++d) ASSERT_EQ(RowValue(bf16, j, d), RowValue(rows.Ref(), j, d));
    std::vector<float> s8(nq * n), s16(nq * n), o8(nq * lora, 0.5f), o16(nq * lora, 0.5f);
    AttentionScores(q.data(), nq, width, rows.Ref(), n, width, s8.data(), n);
    AttentionScores(q.data(), nq, width, bf16, n, width, s16.data(), n);
    AttentionWeightedSums(w.data(), nq, n, rows.Ref(), n, lora, o8.data(), lora);
    AttentionWeightedSums(w.data(), nq, n, bf16, n, lora, o16.data(), lora);
    EXPECT_EQ(std::memcmp(s8.data(), s16.data(), s8.size() * sizeof(float)), 0) << KernelIsaName(isa);
    EXPECT_EQ(std::memcmp(o8.data(), o16.data(), o8.size() * sizeof(float)), 0) << KernelIsaName(isa);
  });
}

}  // namespace
}  // namespace tandem::engine::kernels::cpu
