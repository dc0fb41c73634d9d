#include "engine/kv/integrity_tracker.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/kv/page_allocator.h"
#include "engine/kv/prefix_cache.h"

namespace tandem::engine::kv {
namespace {

std::vector<PageId> Pages(const std::vector<PageRef>& refs) {
  std::vector<PageId> out;
  for (const PageRef& r : refs) out.push_back(r.page);
  return out;
}

// Requests' page lists as a step would read them. The lists must outlive the batch.
using Lists = std::vector<std::pair<RequestId, std::vector<PageId>>>;
std::vector<RequestPages> Batch(const Lists& lists) {
  std::vector<RequestPages> batch;
  for (const auto& [id, pages] : lists) batch.push_back({id, pages});
  return batch;
}

TEST(IntegrityTrackerTest, CleanBatchPassesAndCountsPages) {
  TagTracker tags(16);
  PageAllocator alloc(16, &tags);
  std::vector<PageRef> a, b;
  ASSERT_TRUE(alloc.Allocate(3, &a).ok());
  ASSERT_TRUE(alloc.Allocate(2, &b).ok());
  tags.MapPages(1, 0, Pages(a));
  tags.MapPages(2, 0, Pages(b));
  const Lists lists = {{1, Pages(a)}, {2, Pages(b)}};
  VerifyResult result;
  tags.VerifyBatch(Batch(lists), &result);
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(tags.counters().pages_checked, 5u);
  EXPECT_EQ(tags.counters().batches_verified, 1u);
}

TEST(IntegrityTrackerTest, ReallocatedPageFailsOnlyItsFormerOwner) {
  TagTracker tags(4);
  PageAllocator alloc(4, &tags);
  std::vector<PageRef> a, b;
  ASSERT_TRUE(alloc.Allocate(2, &a).ok());
  tags.MapPages(7, 0, Pages(a));
  alloc.InjectHandOutNext(a[1].page);
  ASSERT_TRUE(alloc.Allocate(1, &b).ok());
  tags.MapPages(8, 0, Pages(b));
  const Lists lists = {{7, Pages(a)}, {8, Pages(b)}};
  VerifyResult result;
  tags.VerifyBatch(Batch(lists), &result);
  ASSERT_EQ(result.failed, std::vector<RequestId>{7});
  const IntegrityIncident& inc = result.incidents[0];
  EXPECT_EQ(inc.request, 7u);
  EXPECT_EQ(inc.logical_page, 1u);
  EXPECT_EQ(inc.physical_page, a[1].page);
  EXPECT_EQ(inc.expected_page, a[1].page);
  EXPECT_EQ(inc.reason, MismatchReason::kGeneration);
  EXPECT_EQ(inc.expected_generation, 1u);
  EXPECT_EQ(inc.found_generation, 2u);
  EXPECT_EQ(tags.counters().mismatches[0], 1u);
  EXPECT_EQ(tags.counters().requests_failed, 1u);
}

TEST(IntegrityTrackerTest, TailAppendRefreshesTheManifest) {
  TagTracker tags(8);
  PageAllocator alloc(8, &tags);
  std::vector<PageRef> refs;
  ASSERT_TRUE(alloc.Allocate(1, &refs).ok());
  tags.MapPages(3, 0, Pages(refs));
  ASSERT_TRUE(alloc.Allocate(1, &refs).ok());
  tags.MapPages(3, 1, std::vector<PageId>{refs[1].page});
  EXPECT_EQ(tags.manifest_pages(3), 2u);
  const Lists lists = {{3, Pages(refs)}};
  VerifyResult result;
  tags.VerifyBatch(Batch(lists), &result);
  EXPECT_TRUE(result.ok());
}

TEST(IntegrityTrackerTest, EntryOfAnotherRequestFailsTheTagCheck) {
  // A manifest entry copied from request 1 into request 2 (same page, same generation) carries
  // request 1's tag: when request 2's page list follows it to request 1's page, only the tag tells.
  TagTracker tags(4);
  PageAllocator alloc(4, &tags);
  std::vector<PageRef> one, two;
  ASSERT_TRUE(alloc.Allocate(1, &one).ok());
  ASSERT_TRUE(alloc.Allocate(1, &two).ok());
  tags.MapPages(1, 0, Pages(one));
  tags.MapPages(2, 0, Pages(two));
  EXPECT_NE(PageTag(1, 0, one[0].page, 1), PageTag(2, 0, one[0].page, 1));
  EXPECT_NE(PageTag(1, 0, one[0].page, 1), PageTag(1, 1, one[0].page, 1));
  EXPECT_NE(PageTag(1, 0, one[0].page, 1), PageTag(1, 0, one[0].page, 2));
  tags.InjectCopyManifestEntry(1, 0, 2, 0);
  const Lists lists = {{1, Pages(one)}, {2, Pages(one)}};
  VerifyResult result;
  tags.VerifyBatch(Batch(lists), &result);
  ASSERT_EQ(result.failed, std::vector<RequestId>{2});
  EXPECT_EQ(result.incidents[0].reason, MismatchReason::kTag);
  EXPECT_EQ(result.incidents[0].physical_page, one[0].page);
  EXPECT_EQ(result.incidents[0].expected_generation, result.incidents[0].found_generation);
  // Request 2 reading its own page again: the copied entry names another page.
  const Lists own = {{2, Pages(two)}};
  tags.VerifyBatch(Batch(own), &result);
  ASSERT_EQ(result.failed, std::vector<RequestId>{2});
  EXPECT_EQ(result.incidents[0].reason, MismatchReason::kWrongPage);
  EXPECT_EQ(result.incidents[0].physical_page, two[0].page);
  EXPECT_EQ(result.incidents[0].expected_page, one[0].page);
}

TEST(IntegrityTrackerTest, PageListPointingAtAnotherRequestsPageFails) {
  // The block-table bug the manifest alone cannot see: request 1's list (what the kernels read)
  // names request 2's live page. Its manifest and every generation are untouched.
  TagTracker tags(8);
  PageAllocator alloc(8, &tags);
  std::vector<PageRef> a, b;
  ASSERT_TRUE(alloc.Allocate(3, &a).ok());
  ASSERT_TRUE(alloc.Allocate(3, &b).ok());
  tags.MapPages(1, 0, Pages(a));
  tags.MapPages(2, 0, Pages(b));
  std::vector<PageId> list = Pages(a);
  list[1] = b[2].page;
  const Lists lists = {{1, list}, {2, Pages(b)}};
  VerifyResult result;
  tags.VerifyBatch(Batch(lists), &result);
  ASSERT_EQ(result.failed, std::vector<RequestId>{1});
  const IntegrityIncident& inc = result.incidents[0];
  EXPECT_EQ(inc.reason, MismatchReason::kWrongPage);
  EXPECT_EQ(inc.logical_page, 1u);
  EXPECT_EQ(inc.physical_page, b[2].page);
  EXPECT_EQ(inc.expected_page, a[1].page);
  EXPECT_EQ(tags.counters().mismatches[static_cast<size_t>(MismatchReason::kWrongPage)], 1u);
  EXPECT_STREQ(MismatchReasonName(MismatchReason::kWrongPage), "wrong_page");
}

TEST(IntegrityTrackerTest, PagesTheManifestDoesNotKnowFail) {
  TagTracker tags(8);
  PageAllocator alloc(8, &tags);
  std::vector<PageRef> a;
  ASSERT_TRUE(alloc.Allocate(3, &a).ok());
  tags.MapPages(1, 0, std::vector<PageId>{a[0].page, a[1].page});
  VerifyResult result;
  // A list longer than the manifest (a page appended to the list but never mapped).
  const Lists longer = {{1, Pages(a)}};
  tags.VerifyBatch(Batch(longer), &result);
  ASSERT_EQ(result.failed, std::vector<RequestId>{1});
  EXPECT_EQ(result.incidents[0].reason, MismatchReason::kWrongPage);
  EXPECT_EQ(result.incidents[0].logical_page, 2u);
  EXPECT_EQ(result.incidents[0].expected_page, kInvalidPage);
  // A page id outside the pool is a wrong page, not an out-of-bounds read.
  const Lists bogus = {{1, {a[0].page, 1000}}};
  tags.VerifyBatch(Batch(bogus), &result);
  ASSERT_EQ(result.failed, std::vector<RequestId>{1});
  EXPECT_EQ(result.incidents[0].reason, MismatchReason::kWrongPage);
  EXPECT_EQ(result.incidents[0].physical_page, 1000u);
  // A prefix of the manifest (the pages this step reads) passes; so does an empty list.
  const Lists prefix = {{1, {a[0].page}}, {1, {}}};
  tags.VerifyBatch(Batch(prefix), &result);
  EXPECT_TRUE(result.ok());
}

TEST(IntegrityTrackerTest, PageFreedAndReallocatedUnderALiveRequestFails) {
  TagTracker tags(4);
  PageAllocator alloc(4, &tags);
  std::vector<PageRef> a, b;
  ASSERT_TRUE(alloc.Allocate(2, &a).ok());
  tags.MapPages(1, 0, Pages(a));
  alloc.InjectFreeWhileMapped(a[0].page);
  ASSERT_TRUE(alloc.Allocate(1, &b).ok());  // LIFO: the freed page
  ASSERT_EQ(b[0].page, a[0].page);
  tags.MapPages(2, 0, Pages(b));
  const Lists lists = {{1, Pages(a)}, {2, Pages(b)}};
  VerifyResult result;
  tags.VerifyBatch(Batch(lists), &result);
  ASSERT_EQ(result.failed, std::vector<RequestId>{1});
  EXPECT_EQ(result.incidents[0].reason, MismatchReason::kGeneration);
  EXPECT_EQ(result.incidents[0].expected_generation, 1u);
  EXPECT_EQ(result.incidents[0].found_generation, 3u);  // freed (2), allocated again (3)
}

TEST(IntegrityTrackerTest, LateTransferWriteIntoAnotherOwnersPageFails) {
  // Request 1 was receiving a transfer and was aborted; its page went to request 2, and the old
  // transfer's stamp lands afterwards.
  TagTracker tags(4);
  PageAllocator alloc(4, &tags);
  std::vector<PageRef> a, b;
  ASSERT_TRUE(alloc.Allocate(1, &a).ok());
  tags.MapPages(1, 0, Pages(a));
  tags.ExpectTransferTag(1, 0, 0x77);
  tags.DropRequest(1);
  ASSERT_TRUE(alloc.Unref(a[0]).ok());
  ASSERT_TRUE(alloc.Allocate(1, &b).ok());
  ASSERT_EQ(b[0].page, a[0].page);
  tags.MapPages(2, 0, Pages(b));
  tags.StampTransferTag(b[0].page, 0x77);
  const Lists lists = {{2, Pages(b)}};
  VerifyResult result;
  tags.VerifyBatch(Batch(lists), &result);
  ASSERT_EQ(result.failed, std::vector<RequestId>{2});
  EXPECT_EQ(result.incidents[0].reason, MismatchReason::kTransferTag);
  EXPECT_EQ(result.incidents[0].found_transfer_tag, 0x77u);
  EXPECT_EQ(result.incidents[0].expected_transfer_tag, 0u);
}

TEST(IntegrityTrackerTest, StalePrefixCachePageFails) {
  // Request 2 adopted a page request 1 published to the prefix cache; the page is then freed under
  // the cache and request 2 (a fault) and handed to request 3.
  TagTracker tags(4);
  PageAllocator alloc(4, &tags);
  PrefixCache cache(&alloc, 2);
  const std::string salt = MakeTenantSalt({"t"});
  const std::vector<int32_t> prompt = {1, 2};
  std::vector<PageRef> one, three;
  ASSERT_TRUE(alloc.Allocate(1, &one).ok());
  StatusOr<PrefixCache::Lock> published = cache.Insert(salt, prompt, one);
  ASSERT_TRUE(published.ok());
  cache.Unlock(*published);
  ASSERT_TRUE(alloc.Unref(one[0]).ok());  // request 1 is done; the cache keeps the page
  PrefixCache::Match match = cache.MatchAndLock(salt, prompt);
  ASSERT_EQ(match.pages.size(), 1u);
  tags.MapPages(2, 0, Pages(match.pages));
  alloc.InjectFreeWhileMapped(match.pages[0].page);
  ASSERT_TRUE(alloc.Allocate(1, &three).ok());
  ASSERT_EQ(three[0].page, match.pages[0].page);
  tags.MapPages(3, 0, Pages(three));
  const Lists lists = {{2, Pages(match.pages)}, {3, Pages(three)}};
  VerifyResult result;
  tags.VerifyBatch(Batch(lists), &result);
  ASSERT_EQ(result.failed, std::vector<RequestId>{2});
  EXPECT_EQ(result.incidents[0].reason, MismatchReason::kGeneration);
  // The cache's reference is stale now: no later request is handed the page.
  PrefixCache::Match again = cache.MatchAndLock(salt, prompt);
  EXPECT_TRUE(again.pages.empty());
  cache.Unlock(match.lock);
}

TEST(IntegrityTrackerTest, UnexpectedTransferTagIsALateWrite) {
  TagTracker tags(4);
  PageAllocator alloc(4, &tags);
  std::vector<PageRef> refs;
  ASSERT_TRUE(alloc.Allocate(2, &refs).ok());
  tags.MapPages(5, 0, Pages(refs));
  tags.ExpectTransferTag(5, 0, 0xabcd);
  tags.StampTransferTag(refs[0].page, 0xabcd);  // the expected transfer landed
  const Lists lists = {{5, Pages(refs)}};
  VerifyResult result;
  tags.VerifyBatch(Batch(lists), &result);
  EXPECT_TRUE(result.ok());
  tags.StampTransferTag(refs[1].page, 0x1234);  // a stranger's write
  tags.VerifyBatch(Batch(lists), &result);
  ASSERT_EQ(result.failed.size(), 1u);
  EXPECT_EQ(result.incidents[0].reason, MismatchReason::kTransferTag);
  EXPECT_EQ(result.incidents[0].logical_page, 1u);
  EXPECT_EQ(result.incidents[0].found_transfer_tag, 0x1234u);
  EXPECT_EQ(result.incidents[0].expected_transfer_tag, 0u);
}

TEST(IntegrityTrackerTest, UnknownRequestFailsWithoutCrashing) {
  TagTracker tags(4);
  const Lists lists = {{42, {0, 1}}};
  VerifyResult result;
  tags.VerifyBatch(Batch(lists), &result);
  ASSERT_EQ(result.failed, std::vector<RequestId>{42});
  EXPECT_EQ(result.incidents[0].reason, MismatchReason::kNoManifest);
}

// The flat checks a device kernel reads (BuildPageChecks + CheckPages over CopyTables' tables)
// fail exactly the requests VerifyBatch fails, over random batches with every kind of fault:
// generations bumped, a stranger's transfer stamp, a page swapped in from another request, a list
// longer than its manifest, a manifest entry copied from another request, an unknown request.
TEST(IntegrityTrackerTest, FlatPageChecksFailTheRequestsVerifyBatchFails) {
  const uint32_t seed = std::random_device{}();
  std::printf("[page_checks] seed %u\n", seed);
  std::mt19937 rng(seed);
  int failing_rounds = 0;
  for (int round = 0; round < 200; ++round) {
    const size_t num_pages = 64;
    TagTracker tags(num_pages);
    PageAllocator alloc(num_pages, &tags);
    Lists lists;
    for (RequestId id = 1; id <= 6; ++id) {
      std::vector<PageRef> refs;
      ASSERT_TRUE(alloc.Allocate(1 + rng() % 8, &refs).ok());
      tags.MapPages(id, 0, Pages(refs));
      lists.push_back({id, Pages(refs)});
    }
    const int faults = static_cast<int>(rng() % 4);
    for (int f = 0; f < faults; ++f) {
      auto& [id, pages] = lists[rng() % lists.size()];
      const auto& other = lists[rng() % lists.size()].second;
      switch (rng() % 6) {
        case 0: tags.InjectBumpGeneration(pages[rng() % pages.size()]); break;
        case 1: tags.StampTransferTag(pages[rng() % pages.size()], 0x5000 + f); break;
        case 2: pages[rng() % pages.size()] = other[rng() % other.size()]; break;
        case 3: pages.push_back(other[rng() % other.size()]); break;
        case 4:
          tags.InjectCopyManifestEntry(lists[rng() % lists.size()].first, 0, id,
                                       static_cast<uint32_t>(rng() % pages.size()));
          break;
        default:
          lists.push_back({static_cast<RequestId>(100 + f), {static_cast<PageId>(rng() % num_pages)}});
          break;
      }
    }
    if (rng() % 4 == 0) lists[rng() % lists.size()].second.resize(1);  // a shorter list checks only its pages
    const std::vector<RequestPages> batch = Batch(lists);
    VerifyResult result;
    tags.VerifyBatch(batch, &result);
    PageChecks checks;
    tags.BuildPageChecks(batch, &checks);
    std::vector<uint64_t> generation;
    std::vector<uint32_t> transfer_tag;
    tags.CopyTables(&generation, &transfer_tag);
    const bool host_failed =
        std::find(checks.item_failed.begin(), checks.item_failed.end(), 1) != checks.item_failed.end();
    const bool any = CheckPages(checks.checks.data(), checks.checks.size(), generation.data(),
                                transfer_tag.data(), num_pages, checks.item_failed.data());
    std::vector<RequestId> failed;
    for (size_t b = 0; b < batch.size(); ++b) {
      if (checks.item_failed[b] != 0) failed.push_back(batch[b].request);
    }
    ASSERT_EQ(failed, result.failed) << "round " << round;
    EXPECT_EQ(any || host_failed, !result.ok()) << "round " << round;
    failing_rounds += result.ok() ? 0 : 1;
  }
  EXPECT_GT(failing_rounds, 50);  // the faults did fail requests
  EXPECT_LT(failing_rounds, 200);
}

TEST(IntegrityTrackerTest, NoopTrackerDoesNothing) {
  NoopTracker noop;
  EXPECT_FALSE(noop.enabled());
  const Lists lists = {{1, {0}}, {2, {7}}, {3, {}}};
  VerifyResult result;
  result.failed.push_back(9);
  noop.VerifyBatch(Batch(lists), &result);
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(noop.counters().pages_checked, 0u);
}

}  // namespace
}  // namespace tandem::engine::kv
