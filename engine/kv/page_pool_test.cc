#include "engine/kv/page_pool.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/formats/convert.h"
#include "engine/formats/float_codecs.h"

namespace tandem::engine::kv {
namespace {

constexpr size_t kGiB = size_t{1} << 30;

PagePoolConfig SmallConfig(KvCacheDtype dtype, size_t pages, size_t page_tokens = 16) {
  PagePoolConfig c;
  c.shape.num_layers = 3;
  c.dtype = dtype;
  c.page_tokens = page_tokens;
  c.budget_bytes = pages * 3 * page_tokens * KvBytesPerTokenLayer(dtype);
  return c;
}

std::vector<uint16_t> RandomRows(size_t rows, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<uint16_t> out(rows * 576);
  for (auto& v : out) v = FloatToBf16(dist(rng));
  return out;
}

TEST(PagePoolTest, KimiGeometryIsExact) {
  PagePoolConfig c;  // Kimi K2.6: 61 layers, 512 + 64, pages of 64 tokens
  c.budget_bytes = kGiB;
  auto bf16 = ComputePoolGeometry(c);
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  EXPECT_EQ(bf16->row_bytes, 1152u);
  EXPECT_EQ(bf16->page_bytes, 61u * 64u * 1152u);
  EXPECT_EQ(bf16->num_pages, kGiB / (61u * 64u * 1152u));
  EXPECT_EQ(bf16->capacity_tokens, bf16->num_pages * 64u);
  c.dtype = KvCacheDtype::kFp8E4M3;
  auto fp8 = ComputePoolGeometry(c);
  ASSERT_TRUE(fp8.ok());
  EXPECT_EQ(fp8->row_bytes, 576u);
  EXPECT_EQ(fp8->page_bytes, bf16->page_bytes / 2);
}

// The capacity table of docs/kv-cache.md: FP8 holds >= 1.99x the tokens of BF16 at equal bytes.
TEST(PagePoolTest, Fp8HoldsTwiceTheTokensAtEveryBudget) {
  for (size_t gib : {1, 4, 16}) {
    for (size_t layers : {size_t{61}, size_t{78}, size_t{4}}) {
      PagePoolConfig c;
      c.shape.num_layers = layers;
      c.budget_bytes = gib * kGiB;
      const size_t bf16 = ComputePoolGeometry(c)->capacity_tokens;
      c.dtype = KvCacheDtype::kFp8E4M3;
      const size_t fp8 = ComputePoolGeometry(c)->capacity_tokens;
      EXPECT_GE(static_cast<double>(fp8), 1.99 * static_cast<double>(bf16)) << gib << " GiB, " << layers;
      if (layers == 61) {
        std::printf("Kimi K2.6 61 layers, %2zu GiB: bf16 %9zu tokens, fp8 %9zu tokens (x%.4f)\n", gib, bf16,
                    fp8, static_cast<double>(fp8) / static_cast<double>(bf16));
      }
    }
  }
}

TEST(PagePoolTest, RejectsBadConfigs) {
  PagePoolConfig c;
  c.budget_bytes = 1000;  // under one page
  EXPECT_EQ(ComputePoolGeometry(c).status().code(), StatusCode::kInvalidArgument);
  c.budget_bytes = kGiB;
  c.page_tokens = 0;
  EXPECT_EQ(ComputePoolGeometry(c).status().code(), StatusCode::kInvalidArgument);
  PagePoolConfig scales = SmallConfig(KvCacheDtype::kBf16, 2);
  scales.fp8_layer_scales = {1.0f, 1.0f, 1.0f};
  EXPECT_EQ(PagePool::Create(scales).status().code(), StatusCode::kInvalidArgument);
  scales.dtype = KvCacheDtype::kFp8E4M3;
  scales.fp8_layer_scales = {1.0f, 0.0f, 1.0f};
  EXPECT_EQ(PagePool::Create(scales).status().code(), StatusCode::kInvalidArgument);
}

TEST(PagePoolTest, Bf16RoundTripIsExact) {
  auto pool = PagePool::Create(SmallConfig(KvCacheDtype::kBf16, 4));
  ASSERT_TRUE(pool.ok());
  std::vector<uint16_t> rows = RandomRows(5, 2.0f, 1);
  ASSERT_TRUE((*pool)->WriteRows(2, 1, 11, rows).ok());
  std::vector<uint16_t> back(rows.size());
  ASSERT_TRUE((*pool)->ReadRows(2, 1, 11, back).ok());
  EXPECT_EQ(back, rows);
  // Other pages and layers are untouched.
  std::vector<uint16_t> other(rows.size());
  ASSERT_TRUE((*pool)->ReadRows(2, 0, 11, other).ok());
  EXPECT_EQ(other, std::vector<uint16_t>(rows.size(), 0));
}

TEST(PagePoolTest, Bf16RowsInPlaceAreTheWrittenRows) {
  auto pool = PagePool::Create(SmallConfig(KvCacheDtype::kBf16, 4));
  ASSERT_TRUE(pool.ok());
  std::vector<uint16_t> rows = RandomRows(5, 2.0f, 3);
  ASSERT_TRUE((*pool)->WriteRows(3, 1, 11, rows).ok());
  StatusOr<const uint16_t*> in_place = (*pool)->Bf16RowsInPlace(3, 1);
  ASSERT_TRUE(in_place.ok()) << in_place.status().ToString();
  const size_t row_values = rows.size() / 5;
  EXPECT_EQ(std::vector<uint16_t>(*in_place + 11 * row_values, *in_place + 16 * row_values), rows);
  EXPECT_EQ((*pool)->Bf16RowsInPlace(4, 0).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ((*pool)->Bf16RowsInPlace(0, 99).status().code(), StatusCode::kOutOfRange);
  auto fp8 = PagePool::Create(SmallConfig(KvCacheDtype::kFp8E4M3, 4));
  ASSERT_TRUE(fp8.ok());
  EXPECT_EQ((*fp8)->Bf16RowsInPlace(0, 0).status().code(), StatusCode::kFailedPrecondition);
}

TEST(PagePoolTest, Fp8CalibratesOnFirstWriteThenKeepsTheScale) {
  auto pool = PagePool::Create(SmallConfig(KvCacheDtype::kFp8E4M3, 4));
  ASSERT_TRUE(pool.ok());
  PagePool& p = **pool;
  EXPECT_FALSE(p.layer_scale_fixed(0));
  std::vector<uint16_t> rows = RandomRows(16, 3.0f, 2);
  ASSERT_TRUE(p.WriteRows(0, 0, 0, rows).ok());
  ASSERT_TRUE(p.layer_scale_fixed(0));
  const float scale = p.layer_scale(0);
  EXPECT_FLOAT_EQ(scale, Fp8E4M3ScaleForBf16(rows.data(), rows.size()));
  std::vector<uint16_t> back(rows.size());
  ASSERT_TRUE(p.ReadRows(0, 0, 0, back).ok());
  for (size_t i = 0; i < rows.size(); ++i) {
    const float x = Bf16ToFloat(rows[i]);
    // e4m3 keeps 3 mantissa bits: relative error <= 2^-4 in the normal range, plus the subnormal step.
    ASSERT_LE(std::fabs(Bf16ToFloat(back[i]) - x), std::fabs(x) / 16 + scale / 512 + 1e-6f) << i;
  }
  // A later, larger batch does not move the scale: it saturates at 448 * scale.
  std::vector<uint16_t> big(576, FloatToBf16(1e4f));
  ASSERT_TRUE(p.WriteRows(1, 0, 0, big).ok());
  EXPECT_EQ(p.layer_scale(0), scale);
  std::vector<uint16_t> big_back(576);
  ASSERT_TRUE(p.ReadRows(1, 0, 0, big_back).ok());
  EXPECT_FLOAT_EQ(Bf16ToFloat(big_back[0]), Bf16ToFloat(FloatToBf16(448.0f * scale)));
}

TEST(PagePoolTest, Fp8CalibratesOnAWholePrefillBatch) {
  auto pool = PagePool::Create(SmallConfig(KvCacheDtype::kFp8E4M3, 4));
  ASSERT_TRUE(pool.ok());
  PagePool& p = **pool;
  std::vector<uint16_t> batch = RandomRows(40, 1.0f, 3);
  batch[7 * 576 + 5] = FloatToBf16(-12.0f);  // the batch's extreme sits in a later page
  ASSERT_TRUE(p.CalibrateLayerScale(2, batch).ok());
  EXPECT_FLOAT_EQ(p.layer_scale(2), 12.0f / kFp8E4M3Max);
  ASSERT_TRUE(p.WriteRows(0, 2, 0, std::span<const uint16_t>(batch).subspan(0, 576)).ok());
  EXPECT_FLOAT_EQ(p.layer_scale(2), 12.0f / kFp8E4M3Max);  // the first write does not recalibrate
  ASSERT_TRUE(p.CalibrateLayerScale(2, RandomRows(1, 100.0f, 4)).ok());
  EXPECT_FLOAT_EQ(p.layer_scale(2), 12.0f / kFp8E4M3Max);  // fixed once set
  EXPECT_EQ(p.CalibrateLayerScale(3, batch).code(), StatusCode::kOutOfRange);
}

TEST(PagePoolTest, Fp8UsesCheckpointScales) {
  PagePoolConfig c = SmallConfig(KvCacheDtype::kFp8E4M3, 2);
  c.fp8_layer_scales = {0.5f, 0.25f, 2.0f};
  auto pool = PagePool::Create(c);
  ASSERT_TRUE(pool.ok());
  std::vector<uint16_t> rows(576, FloatToBf16(3.0f));
  ASSERT_TRUE((*pool)->WriteRows(1, 1, 3, rows).ok());
  EXPECT_EQ((*pool)->layer_scale(1), 0.25f);
  // 3.0 / 0.25 = 12 is exact in e4m3.
  const uint8_t* row = (*pool)->PageBytes(1).data() + (1 * 16 + 3) * 576;
  EXPECT_EQ(row[0], FloatToFp8E4M3(12.0f));
}

TEST(PagePoolTest, BadIndicesAreErrorsNotCrashes) {
  auto pool = PagePool::Create(SmallConfig(KvCacheDtype::kBf16, 2));
  ASSERT_TRUE(pool.ok());
  std::vector<uint16_t> row(576);
  EXPECT_EQ((*pool)->WriteRows(2, 0, 0, row).code(), StatusCode::kOutOfRange);
  EXPECT_EQ((*pool)->WriteRows(0, 3, 0, row).code(), StatusCode::kOutOfRange);
  EXPECT_EQ((*pool)->WriteRows(0, 0, 16, row).code(), StatusCode::kOutOfRange);
  std::vector<uint16_t> two(2 * 576);
  EXPECT_EQ((*pool)->ReadRows(0, 0, 15, two).code(), StatusCode::kOutOfRange);
  std::vector<uint16_t> ragged(100);
  EXPECT_EQ((*pool)->WriteRows(0, 0, 0, ragged).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::engine::kv
