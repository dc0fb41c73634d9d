#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/formats/float_codecs.h"
#include "engine/kv/transfer_ledger.h"
#include "engine/kv/transfer_tags.h"

namespace tandem::engine::kv {
namespace {

TEST(TransferTagTest, TagsAreNonZeroAndDistinct) {
  TransferTagIssuer issuer;
  std::set<uint32_t> seen;
  for (int i = 0; i < 100000; ++i) {
    const uint32_t tag = issuer.Next();
    ASSERT_NE(tag, 0u);
    ASSERT_TRUE(seen.insert(tag).second);
  }
}

PagePoolConfig DigestConfig() {
  PagePoolConfig c;
  c.shape.num_layers = 2;
  c.dtype = KvCacheDtype::kFp8E4M3;
  c.page_tokens = 4;
  c.budget_bytes = 8 * 2 * 4 * 576;
  return c;
}

// Writes tokens [0, n) of a deterministic sequence into `pages` (logical order).
void WriteSequence(PagePool& pool, const std::vector<PageId>& pages, size_t n) {
  std::vector<uint16_t> row(576);
  for (size_t t = 0; t < n; ++t) {
    for (size_t layer = 0; layer < 2; ++layer) {
      for (size_t i = 0; i < row.size(); ++i)
        row[i] = FloatToBf16(static_cast<float>((t * 7 + i + layer) % 50));
      ASSERT_TRUE(pool.WriteRows(pages[t / 4], layer, t % 4, row).ok());
    }
  }
}

TEST(KvDigestTest, IndependentOfPhysicalPages) {
  PagePoolConfig c = DigestConfig();
  c.fp8_layer_scales = {0.5f, 0.5f};
  auto a = PagePool::Create(c);
  auto b = PagePool::Create(c);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<PageId> pa = {0, 1, 2}, pb = {7, 3, 5};
  WriteSequence(**a, pa, 10);
  WriteSequence(**b, pb, 10);
  auto da = DigestKv(**a, pa, 10);
  auto db = DigestKv(**b, pb, 10);
  ASSERT_TRUE(da.ok() && db.ok());
  EXPECT_EQ(*da, *db);
  // One flipped byte, in the used range, changes it; bytes past token 10 do not count.
  (*b)->PageBytes(5)[3 * 576] ^= 1;  // token 11 of layer 0: past the end
  EXPECT_EQ(*DigestKv(**b, pb, 10), *da);
  (*b)->PageBytes(5)[1 * 576] ^= 1;  // token 9 of layer 0
  EXPECT_NE(*DigestKv(**b, pb, 10), *da);
  EXPECT_EQ(DigestKv(**a, pa, 13).status().code(), StatusCode::kInvalidArgument);
}

// GLM-style pools: the digest covers the DSA indexer keys (and FP8's per-row scales) in logical
// token order too, and still not the slots past the end.
TEST(KvDigestTest, CoversTheIndexerRows) {
  for (KvCacheDtype dtype : {KvCacheDtype::kBf16, KvCacheDtype::kFp8E4M3}) {
    PagePoolConfig c = DigestConfig();
    c.dtype = dtype;
    c.shape.index_head_dim = 16;
    c.shape.index_layers = {false, true};
    c.budget_bytes = 1 << 20;
    if (dtype == KvCacheDtype::kFp8E4M3) c.fp8_layer_scales = {0.5f, 0.5f};
    auto a = PagePool::Create(c);
    auto b = PagePool::Create(c);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString();
    const std::vector<PageId> pa = {0, 1, 2}, pb = {7, 3, 5};
    WriteSequence(**a, pa, 10);
    WriteSequence(**b, pb, 10);
    std::vector<float> key(16);
    for (size_t t = 0; t < 10; ++t) {
      for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<float>((t * 5 + i) % 13) - 6.0f;
      ASSERT_TRUE((*a)->WriteIndexKeys(pa[t / 4], 1, t % 4, key).ok());
      ASSERT_TRUE((*b)->WriteIndexKeys(pb[t / 4], 1, t % 4, key).ok());
    }
    const uint64_t da = *DigestKv(**a, pa, 10);
    EXPECT_EQ(*DigestKv(**b, pb, 10), da);
    for (const PagePool::TokenBlock& block : (*b)->TokenBlocks(1)) {
      std::span<uint8_t> page = (*b)->PageBytes(5);     // logical page 2: tokens 8, 9 (10, 11 unused)
      page[block.offset + 3 * block.token_bytes] ^= 1;  // token 11: past the end
      EXPECT_EQ(*DigestKv(**b, pb, 10), da);
      page[block.offset + 1 * block.token_bytes] ^= 1;  // token 9
      EXPECT_NE(*DigestKv(**b, pb, 10), da) << block.offset;
      page[block.offset + 1 * block.token_bytes] ^= 1;
    }
    // The indexer keys are digested: a pool without them digests the same latent differently.
    PagePoolConfig plain = DigestConfig();
    plain.dtype = dtype;
    plain.budget_bytes = 1 << 20;
    if (dtype == KvCacheDtype::kFp8E4M3) plain.fp8_layer_scales = {0.5f, 0.5f};
    auto p = PagePool::Create(plain);
    ASSERT_TRUE(p.ok());
    WriteSequence(**p, pa, 10);
    EXPECT_NE(*DigestKv(**p, pa, 10), da);
  }
}

TEST(KvDigestTest, ChunkingDoesNotMatter) {
  std::vector<uint8_t> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31);
  KvDigest whole;
  whole.Update(bytes);
  KvDigest parts;
  std::span<const uint8_t> s(bytes);
  parts.Update(s.subspan(0, 3));
  parts.Update(s.subspan(3, 500));
  parts.Update(s.subspan(503));
  EXPECT_EQ(whole.Finish(), parts.Finish());
}

TEST(TransferLedgerTest, ExactlyOneTerminalState) {
  FakeClock clock;
  TransferLedger ledger(&clock);
  ASSERT_TRUE(ledger.Begin(1, 10, 1000).ok());
  EXPECT_EQ(ledger.Begin(1, 10, 1000).code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(ledger.Finish(1, TransferState::kDone).ok());
  EXPECT_EQ(ledger.Finish(1, TransferState::kFailed).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ledger.Finish(99, TransferState::kDone).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ledger.counters().done, 1u);
  EXPECT_EQ(ledger.counters().failed, 0u);
  EXPECT_EQ(ledger.counters().refused_terminal_reports, 2u);
}

TEST(TransferLedgerTest, TimeoutIsTerminalAndLateDoneIsRefused) {
  FakeClock clock;
  TransferLedger ledger(&clock);
  ASSERT_TRUE(ledger.Begin(1, 10, 50).ok());
  clock.AdvanceMillis(49);
  EXPECT_EQ(ledger.ExpireOverdue(), 0u);
  clock.AdvanceMillis(1);
  EXPECT_EQ(ledger.ExpireOverdue(), 1u);
  EXPECT_EQ(ledger.Finish(1, TransferState::kDone).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ledger.counters().timed_out, 1u);
}

TEST(TransferLedgerTest, AbortedRequestPagesWaitForTheTerminalState) {
  FakeClock clock;
  TransferLedger ledger(&clock);
  ASSERT_TRUE(ledger.Begin(1, 10, 1000).ok());
  const std::vector<PageRef> pages = {{3, 1}, {4, 1}};
  EXPECT_TRUE(ledger.DeferRelease(10, pages));
  EXPECT_TRUE(ledger.TakeReleasable().empty());
  EXPECT_EQ(ledger.parked_pages(), 2u);
  ASSERT_TRUE(ledger.Finish(1, TransferState::kFailed).ok());
  EXPECT_EQ(ledger.TakeReleasable(), pages);
  EXPECT_EQ(ledger.parked_pages(), 0u);
  // No transfer in flight: the caller releases at once.
  EXPECT_FALSE(ledger.DeferRelease(11, pages));
}

// Transfer threads race to report terminal states while the step thread expires and defers:
// every transfer ends exactly once and every deferred page comes back exactly once (TSan-clean).
TEST(TransferLedgerTest, ConcurrentTerminalReportsEndEachTransferOnce) {
  FakeClock clock;
  TransferLedger ledger(&clock);
  constexpr int kTransfers = 2000;
  for (int i = 0; i < kTransfers; ++i) ASSERT_TRUE(ledger.Begin(i, i, 100).ok());
  for (int i = 0; i < kTransfers; i += 2) {
    ASSERT_TRUE(ledger.DeferRelease(i, {PageRef{static_cast<PageId>(i), 1}}));
  }
  std::atomic<int> accepted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kTransfers; ++i) {
        const TransferState s = t == 0 ? TransferState::kDone : TransferState::kFailed;
        if (ledger.Finish(i, s).ok()) accepted.fetch_add(1);
      }
    });
  }
  clock.AdvanceMillis(100);
  size_t expired = 0;
  std::vector<PageRef> released;
  for (int round = 0; round < 50; ++round) {
    expired += ledger.ExpireOverdue();
    for (const PageRef& r : ledger.TakeReleasable()) released.push_back(r);
  }
  for (auto& th : threads) th.join();
  for (const PageRef& r : ledger.TakeReleasable()) released.push_back(r);
  EXPECT_EQ(static_cast<size_t>(accepted.load()) + expired, static_cast<size_t>(kTransfers));
  const TransferLedgerCounters c = ledger.counters();
  EXPECT_EQ(c.done + c.failed + c.timed_out, static_cast<uint64_t>(kTransfers));
  EXPECT_EQ(released.size(), static_cast<size_t>(kTransfers / 2));
  std::set<PageId> distinct;
  for (const PageRef& r : released) distinct.insert(r.page);
  EXPECT_EQ(distinct.size(), released.size());
  EXPECT_EQ(ledger.in_flight(), 0u);
}

}  // namespace
}  // namespace tandem::engine::kv
