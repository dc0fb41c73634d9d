#include "engine/kv/page_pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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

TEST(PagePoolTest, LatentRowsInPlaceAreTheWrittenRows) {
  auto pool = PagePool::Create(SmallConfig(KvCacheDtype::kBf16, 4));
  ASSERT_TRUE(pool.ok());
  std::vector<uint16_t> rows = RandomRows(5, 2.0f, 3);
  ASSERT_TRUE((*pool)->WriteRows(3, 1, 11, rows).ok());
  StatusOr<const uint8_t*> in_place = (*pool)->LatentRowsInPlace(3, 1);
  ASSERT_TRUE(in_place.ok()) << in_place.status().ToString();
  const size_t row_values = rows.size() / 5;
  std::vector<uint16_t> got(rows.size());
  std::memcpy(got.data(), *in_place + 11 * row_values * 2, got.size() * 2);
  EXPECT_EQ(got, rows);
  EXPECT_EQ((*pool)->LatentRowsInPlace(4, 0).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ((*pool)->LatentRowsInPlace(0, 99).status().code(), StatusCode::kOutOfRange);
  // FP8: the codes whose values (times the layer's scale) ReadRows gives.
  auto fp8 = PagePool::Create(SmallConfig(KvCacheDtype::kFp8E4M3, 4));
  ASSERT_TRUE(fp8.ok());
  ASSERT_TRUE((*fp8)->WriteRows(2, 0, 11, rows).ok());
  StatusOr<const uint8_t*> codes = (*fp8)->LatentRowsInPlace(2, 0);
  ASSERT_TRUE(codes.ok());
  std::vector<uint16_t> back(rows.size());
  ASSERT_TRUE((*fp8)->ReadRows(2, 0, 11, back).ok());
  const float scale = (*fp8)->layer_scale(0);
  for (size_t i = 0; i < rows.size(); ++i)
    ASSERT_EQ(back[i], FloatToBf16(Fp8E4M3ToFloat((*codes)[11 * row_values + i]) * scale)) << i;
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

// GLM 5.x: 78 layers of the 576-wide latent plus a 128-wide DSA indexer key per token and layer.
KvShape GlmShape() {
  KvShape s;
  s.num_layers = 78;
  s.index_head_dim = 128;
  return s;
}

TEST(PagePoolTest, GlmGeometryCountsTheIndexerRows) {
  PagePoolConfig c;
  c.shape = GlmShape();
  c.budget_bytes = kGiB;
  auto bf16 = ComputePoolGeometry(c);
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  EXPECT_EQ(bf16->row_bytes, 1152u);
  EXPECT_EQ(bf16->index_row_bytes, 256u);
  EXPECT_EQ(bf16->token_bytes, 78u * (1152 + 256));
  EXPECT_EQ(bf16->page_bytes, 64u * 78u * (1152 + 256));
  EXPECT_EQ(bf16->num_pages, kGiB / bf16->page_bytes);
  EXPECT_EQ(bf16->capacity_tokens, 9728u);  // docs/kv-cache.md's capacity table
  c.dtype = KvCacheDtype::kFp8E4M3;         // FACTS.md: 576 latent + 128 fp8 keys and one fp32 scale
  auto fp8 = ComputePoolGeometry(c);
  ASSERT_TRUE(fp8.ok());
  EXPECT_EQ(fp8->row_bytes, 576u);
  EXPECT_EQ(fp8->index_row_bytes, 132u);
  EXPECT_EQ(fp8->token_bytes, 78u * (576 + 132));
  EXPECT_EQ(fp8->page_bytes, 64u * 78u * (576 + 132));
  EXPECT_EQ(fp8->capacity_tokens, 19392u);  // x1.99: the indexer rows' scales are not halved
  // Only the layers flagged keep indexer rows ("shared" DSA layers keep none).
  c.shape.index_layers.assign(78, false);
  for (size_t l = 0; l < 78; l += 3) c.shape.index_layers[l] = true;
  EXPECT_EQ(ComputePoolGeometry(c)->token_bytes, 78u * 576 + 26u * 132);
  c.shape.index_layers.resize(77);
  EXPECT_EQ(ComputePoolGeometry(c).status().code(), StatusCode::kInvalidArgument);
  c.shape.index_layers.assign(78, true);
  c.shape.index_head_dim = 0;
  EXPECT_EQ(ComputePoolGeometry(c).status().code(), StatusCode::kInvalidArgument);
}

// Three layers, the middle one without indexer rows, keys 8 wide, pages of 4 tokens.
PagePoolConfig IndexedConfig(KvCacheDtype dtype) {
  PagePoolConfig c;
  c.shape.num_layers = 3;
  c.shape.index_head_dim = 8;
  c.shape.index_layers = {true, false, true};
  c.dtype = dtype;
  c.page_tokens = 4;
  c.budget_bytes = 1 << 20;
  return c;
}

std::vector<float> RandomKeys(size_t n, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> out(n);
  for (float& v : out) v = dist(rng);
  return out;
}

TEST(PagePoolTest, IndexKeysRoundTripAsBf16BesideTheLatent) {
  auto pool = PagePool::Create(IndexedConfig(KvCacheDtype::kBf16));
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  PagePool& p = **pool;
  std::vector<uint16_t> latent(3 * 576);
  for (size_t i = 0; i < latent.size(); ++i) latent[i] = FloatToBf16(static_cast<float>(i % 97));
  for (size_t layer = 0; layer < 3; ++layer) ASSERT_TRUE(p.WriteRows(5, layer, 1, latent).ok());
  const std::vector<float> keys = RandomKeys(3 * 8, 2.0f, 7);
  ASSERT_TRUE(p.WriteIndexKeys(5, 0, 1, keys).ok());
  ASSERT_TRUE(p.WriteIndexKeys(5, 2, 1, keys).ok());
  std::vector<float> back(keys.size());
  ASSERT_TRUE(p.ReadIndexKeys(5, 2, 1, back).ok());
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(back[i], Bf16ToFloat(FloatToBf16(keys[i]))) << i;
  for (size_t layer = 0; layer < 3; ++layer) {  // the keys do not overlap any layer's latent rows
    std::vector<uint16_t> rows(latent.size());
    ASSERT_TRUE(p.ReadRows(5, layer, 1, rows).ok());
    EXPECT_EQ(rows, latent) << layer;
  }
  std::vector<float> other(8);  // nor another slot or page
  ASSERT_TRUE(p.ReadIndexKeys(5, 0, 0, other).ok());
  EXPECT_EQ(other, std::vector<float>(8, 0.0f));
  ASSERT_TRUE(p.ReadIndexKeys(4, 0, 1, other).ok());
  EXPECT_EQ(other, std::vector<float>(8, 0.0f));
}

TEST(PagePoolTest, Fp8IndexKeysHaveOneScalePerTokenRow) {
  auto pool = PagePool::Create(IndexedConfig(KvCacheDtype::kFp8E4M3));
  ASSERT_TRUE(pool.ok());
  PagePool& p = **pool;
  EXPECT_EQ(p.geometry().index_row_bytes, 8u + 4u);
  // Rows of very different magnitudes, and a zero row: each keeps its own range.
  std::vector<float> keys = RandomKeys(4 * 8, 1.0f, 9);
  for (size_t i = 0; i < 8; ++i) keys[i] *= 1e-3f;
  for (size_t i = 8; i < 16; ++i) keys[i] *= 1e3f;
  for (size_t i = 24; i < 32; ++i) keys[i] = 0.0f;
  ASSERT_TRUE(p.WriteIndexKeys(2, 2, 0, keys).ok());
  std::vector<float> back(keys.size());
  ASSERT_TRUE(p.ReadIndexKeys(2, 2, 0, back).ok());
  for (size_t r = 0; r < 4; ++r) {
    float amax = 0;
    for (size_t i = 0; i < 8; ++i) amax = std::max(amax, std::fabs(keys[r * 8 + i]));
    const float scale = amax > 0 ? amax / kFp8E4M3Max : 1.0f;
    // The row's scale sits after the page's codes of that layer: [4 tokens][8] codes, [4] fp32.
    const PagePool::TokenBlock scales = p.TokenBlocks(2)[2];
    EXPECT_EQ(scales.token_bytes, 4u);
    float stored;
    std::memcpy(&stored, p.PageBytes(2).data() + scales.offset + r * 4, 4);
    EXPECT_EQ(stored, scale) << r;
    for (size_t i = 0; i < 8; ++i) {
      const float x = keys[r * 8 + i];
      EXPECT_EQ(back[r * 8 + i], Fp8E4M3ToFloat(FloatToFp8E4M3(x * (1.0f / scale))) * scale);
      // 3 mantissa bits: within 2^-4 relative, plus the subnormal step, of the row's own range.
      EXPECT_LE(std::fabs(back[r * 8 + i] - x), std::fabs(x) / 16 + scale / 512) << r << " " << i;
    }
  }
}

TEST(PagePoolTest, BadIndexKeyIndicesAreErrors) {
  auto pool = PagePool::Create(IndexedConfig(KvCacheDtype::kBf16));
  ASSERT_TRUE(pool.ok());
  PagePool& p = **pool;
  std::vector<float> row(8);
  std::vector<float> out(8);
  const PageId past = static_cast<PageId>(p.num_pages());
  EXPECT_EQ(p.WriteIndexKeys(past, 0, 0, row).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(p.ReadIndexKeys(past, 0, 0, out).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(p.WriteIndexKeys(0, 3, 0, row).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(p.WriteIndexKeys(0, 0, 4, row).code(), StatusCode::kOutOfRange);
  std::vector<float> two(16);
  EXPECT_EQ(p.ReadIndexKeys(0, 0, 3, two).code(), StatusCode::kOutOfRange);
  std::vector<float> ragged(5);
  EXPECT_EQ(p.WriteIndexKeys(0, 0, 0, ragged).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.WriteIndexKeys(0, 1, 0, row).code(), StatusCode::kFailedPrecondition);  // no rows here
  EXPECT_EQ(p.ReadIndexKeys(0, 1, 0, out).code(), StatusCode::kFailedPrecondition);
  auto plain = PagePool::Create(SmallConfig(KvCacheDtype::kBf16, 2));  // no indexer at all
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->WriteIndexKeys(0, 0, 0, row).code(), StatusCode::kFailedPrecondition);
}

TEST(PagePoolTest, ClearTokenSlotsClearsTheIndexerRowsToo) {
  for (KvCacheDtype dtype : {KvCacheDtype::kBf16, KvCacheDtype::kFp8E4M3}) {
    auto pool = PagePool::Create(IndexedConfig(dtype));
    ASSERT_TRUE(pool.ok());
    PagePool& p = **pool;
    const std::vector<float> keys = RandomKeys(4 * 8, 1.0f, 11);
    ASSERT_TRUE(p.WriteIndexKeys(0, 2, 0, keys).ok());
    std::vector<uint8_t> copy(p.PageBytes(0).begin(), p.PageBytes(0).end());
    p.ClearTokenSlots(copy, 2);
    std::memcpy(p.PageBytes(1).data(), copy.data(), copy.size());
    std::vector<float> back(keys.size());
    ASSERT_TRUE(p.ReadIndexKeys(1, 2, 0, back).ok());
    std::vector<float> want(keys.size(), 0.0f);
    ASSERT_TRUE(p.ReadIndexKeys(0, 2, 0, std::span<float>(want).first(16)).ok());
    EXPECT_EQ(back, want) << KvCacheDtypeName(dtype);  // slots 0, 1 kept; 2, 3 zero
  }
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
