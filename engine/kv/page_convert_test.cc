// PageConverter: a page converted into another pool's layout holds exactly what writing the same
// rows into that pool gives (same codes, same scales), slots past the valid tokens are zeros, and
// layouts that cannot take the pages are refused with the reason.
#include "engine/kv/page_convert.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/formats/float_codecs.h"

namespace tandem::engine::kv {
namespace {

constexpr KvShape kShape{3, 8, 4};
constexpr size_t kPageTokens = 5;

std::unique_ptr<PagePool> MakePool(KvCacheDtype dtype, std::vector<float> scales = {}, size_t pages = 4) {
  PagePoolConfig pc;
  pc.shape = kShape;
  pc.dtype = dtype;
  pc.page_tokens = kPageTokens;
  pc.fp8_layer_scales = std::move(scales);
  pc.budget_bytes =
      pages * kPageTokens * kShape.num_layers * kShape.row_values() * (dtype == KvCacheDtype::kBf16 ? 2 : 1);
  return PagePool::Create(pc).value();
}

std::vector<uint16_t> RandomRows(std::mt19937& rng, size_t tokens) {
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<uint16_t> rows(tokens * kShape.row_values());
  for (uint16_t& v : rows) v = FloatToBf16(dist(rng));
  return rows;
}

// Fills `page` of every layer with rows for `tokens` tokens and returns them ([layer] rows).
std::vector<std::vector<uint16_t>> Fill(PagePool& pool, PageId page, size_t tokens, std::mt19937& rng) {
  std::vector<std::vector<uint16_t>> rows;
  for (size_t l = 0; l < kShape.num_layers; ++l) {
    rows.push_back(RandomRows(rng, tokens));
    EXPECT_TRUE(pool.WriteRows(page, l, 0, rows.back()).ok());
  }
  return rows;
}

TEST(PageConvertTest, Bf16ToFp8IsWhatTheFp8PoolWouldHaveWritten) {
  std::mt19937 rng(3);
  auto src = MakePool(KvCacheDtype::kBf16);
  const std::vector<float> scales{0.01f, 0.02f, 0.005f};
  auto dst = MakePool(KvCacheDtype::kFp8E4M3, scales);
  for (size_t valid : {size_t{5}, size_t{3}, size_t{1}}) {
    // Stale rows in the source page first: what lies past `valid` must not travel.
    Fill(*src, 1, kPageTokens, rng);
    const auto rows = Fill(*src, 1, valid, rng);
    for (size_t l = 0; l < kShape.num_layers; ++l) ASSERT_TRUE(dst->WriteRows(2, l, 0, rows[l]).ok());
    std::vector<uint8_t> want(dst->PageBytes(2).begin(), dst->PageBytes(2).end());
    dst->ClearTokenSlots(want, valid);

    auto converter = PageConverter::Create(*src, LayoutOf(*dst).value()).value();
    EXPECT_FALSE(converter->is_copy());
    std::vector<uint8_t> out(dst->geometry().page_bytes, 0xAB);
    ASSERT_TRUE(converter->Convert(1, valid, out).ok());
    EXPECT_EQ(out, want) << "valid " << valid;
    EXPECT_EQ(out.size() * 2, src->geometry().page_bytes);  // FP8 pages are half the bytes
  }
}

TEST(PageConvertTest, Fp8ToBf16DecodesWithTheSourceScales) {
  std::mt19937 rng(4);
  auto src = MakePool(KvCacheDtype::kFp8E4M3, {0.01f, 0.02f, 0.04f});
  auto dst = MakePool(KvCacheDtype::kBf16);
  Fill(*src, 0, 4, rng);
  auto converter = PageConverter::Create(*src, LayoutOf(*dst).value()).value();
  std::vector<uint8_t> out(dst->geometry().page_bytes);
  ASSERT_TRUE(converter->Convert(0, 4, out).ok());
  std::memcpy(dst->PageBytes(3).data(), out.data(), out.size());
  std::vector<uint16_t> a(4 * kShape.row_values()), b(a.size());
  for (size_t l = 0; l < kShape.num_layers; ++l) {
    ASSERT_TRUE(src->ReadRows(0, l, 0, a).ok());
    ASSERT_TRUE(dst->ReadRows(3, l, 0, b).ok());
    EXPECT_EQ(a, b) << "layer " << l;
  }
}

TEST(PageConvertTest, SameLayoutIsACopyWithTheTailCleared) {
  std::mt19937 rng(5);
  auto src = MakePool(KvCacheDtype::kFp8E4M3, {0.5f, 0.25f, 0.125f});
  auto dst = MakePool(KvCacheDtype::kFp8E4M3, {0.5f, 0.25f, 0.125f});
  Fill(*src, 2, kPageTokens, rng);
  auto converter = PageConverter::Create(*src, LayoutOf(*dst).value()).value();
  EXPECT_TRUE(converter->is_copy());
  std::vector<uint8_t> out(src->geometry().page_bytes);
  ASSERT_TRUE(converter->Convert(2, 2, out).ok());
  std::vector<uint8_t> want(src->PageBytes(2).begin(), src->PageBytes(2).end());
  src->ClearTokenSlots(want, 2);
  EXPECT_EQ(out, want);
  // Another scale on one layer is a conversion, not a copy.
  auto other = MakePool(KvCacheDtype::kFp8E4M3, {0.5f, 0.25f, 0.5f});
  EXPECT_FALSE(PageConverter::Create(*src, LayoutOf(*other).value()).value()->is_copy());
}

TEST(PageConvertTest, RefusesLayoutsThatCannotTakeThePages) {
  auto src = MakePool(KvCacheDtype::kBf16);
  const KvLayout good = LayoutOf(*MakePool(KvCacheDtype::kFp8E4M3, {1, 1, 1})).value();
  auto refused = [&](KvLayout l, const char* what) {
    const Status st = PageConverter::Create(*src, l).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << what;
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  };
  KvLayout l = good;
  l.page_tokens = 8;
  refused(l, "cannot take pages");
  l = good;
  l.shape.num_layers = 2;
  refused(l, "cannot take pages");
  l = good;
  l.page_bytes += 1;
  refused(l, "bytes per page");
  l = good;
  l.fp8_layer_scales.pop_back();
  refused(l, "one scale per layer");
  l = good;
  l.fp8_layer_scales[1] = -1.0f;
  EXPECT_EQ(PageConverter::Create(*src, l).status().code(), StatusCode::kInvalidArgument);
  auto converter = PageConverter::Create(*src, good).value();
  std::vector<uint8_t> small(good.page_bytes - 1);
  EXPECT_EQ(converter->Convert(0, 1, small).code(), StatusCode::kInvalidArgument);
}

TEST(PageConvertTest, AnUncalibratedFp8PoolHasNoLayoutYet) {
  auto pool = MakePool(KvCacheDtype::kFp8E4M3);
  EXPECT_EQ(LayoutOf(*pool).status().code(), StatusCode::kFailedPrecondition);
  std::mt19937 rng(6);
  Fill(*pool, 0, 1, rng);  // the first writes calibrate every layer
  const KvLayout l = LayoutOf(*pool).value();
  EXPECT_EQ(l.fp8_layer_scales.size(), kShape.num_layers);
  EXPECT_EQ(l.page_bytes, pool->geometry().page_bytes);
}

}  // namespace
}  // namespace tandem::engine::kv
