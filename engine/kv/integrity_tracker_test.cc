#include "engine/kv/integrity_tracker.h"

#include <vector>

#include <gtest/gtest.h>

#include "engine/kv/page_allocator.h"

namespace tandem::engine::kv {
namespace {

std::vector<PageId> Pages(const std::vector<PageRef>& refs) {
  std::vector<PageId> out;
  for (const PageRef& r : refs) out.push_back(r.page);
  return out;
}

TEST(IntegrityTrackerTest, CleanBatchPassesAndCountsPages) {
  TagTracker tags(16);
  PageAllocator alloc(16, &tags);
  std::vector<PageRef> a, b;
  ASSERT_TRUE(alloc.Allocate(3, &a).ok());
  ASSERT_TRUE(alloc.Allocate(2, &b).ok());
  tags.MapPages(1, 0, Pages(a));
  tags.MapPages(2, 0, Pages(b));
  const std::vector<RequestId> batch = {1, 2};
  VerifyResult result;
  tags.VerifyBatch(batch, &result);
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
  const std::vector<RequestId> batch = {7, 8};
  VerifyResult result;
  tags.VerifyBatch(batch, &result);
  ASSERT_EQ(result.failed, std::vector<RequestId>{7});
  const IntegrityIncident& inc = result.incidents[0];
  EXPECT_EQ(inc.request, 7u);
  EXPECT_EQ(inc.logical_page, 1u);
  EXPECT_EQ(inc.physical_page, a[1].page);
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
  const std::vector<RequestId> batch = {3};
  VerifyResult result;
  tags.VerifyBatch(batch, &result);
  EXPECT_TRUE(result.ok());
}

TEST(IntegrityTrackerTest, EntryOfAnotherRequestFailsTheTagCheck) {
  // A manifest entry copied from request 1 into request 2 (same page, same generation) carries
  // request 1's tag.
  TagTracker tags(4);
  PageAllocator alloc(4, &tags);
  std::vector<PageRef> refs;
  ASSERT_TRUE(alloc.Allocate(1, &refs).ok());
  tags.MapPages(1, 0, Pages(refs));
  EXPECT_NE(PageTag(1, 0, refs[0].page, 1), PageTag(2, 0, refs[0].page, 1));
  EXPECT_NE(PageTag(1, 0, refs[0].page, 1), PageTag(1, 1, refs[0].page, 1));
  EXPECT_NE(PageTag(1, 0, refs[0].page, 1), PageTag(1, 0, refs[0].page, 2));
}

TEST(IntegrityTrackerTest, UnexpectedTransferTagIsALateWrite) {
  TagTracker tags(4);
  PageAllocator alloc(4, &tags);
  std::vector<PageRef> refs;
  ASSERT_TRUE(alloc.Allocate(2, &refs).ok());
  tags.MapPages(5, 0, Pages(refs));
  tags.ExpectTransferTag(5, 0, 0xabcd);
  tags.StampTransferTag(refs[0].page, 0xabcd);  // the expected transfer landed
  const std::vector<RequestId> batch = {5};
  VerifyResult result;
  tags.VerifyBatch(batch, &result);
  EXPECT_TRUE(result.ok());
  tags.StampTransferTag(refs[1].page, 0x1234);  // a stranger's write
  tags.VerifyBatch(batch, &result);
  ASSERT_EQ(result.failed.size(), 1u);
  EXPECT_EQ(result.incidents[0].reason, MismatchReason::kTransferTag);
  EXPECT_EQ(result.incidents[0].logical_page, 1u);
  EXPECT_EQ(result.incidents[0].found_transfer_tag, 0x1234u);
  EXPECT_EQ(result.incidents[0].expected_transfer_tag, 0u);
}

TEST(IntegrityTrackerTest, UnknownRequestFailsWithoutCrashing) {
  TagTracker tags(4);
  const std::vector<RequestId> batch = {42};
  VerifyResult result;
  tags.VerifyBatch(batch, &result);
  ASSERT_EQ(result.failed, std::vector<RequestId>{42});
  EXPECT_EQ(result.incidents[0].reason, MismatchReason::kNoManifest);
}

TEST(IntegrityTrackerTest, NoopTrackerDoesNothing) {
  NoopTracker noop;
  EXPECT_FALSE(noop.enabled());
  const std::vector<RequestId> batch = {1, 2, 3};
  VerifyResult result;
  result.failed.push_back(9);
  noop.VerifyBatch(batch, &result);
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(noop.counters().pages_checked, 0u);
}

}  // namespace
}  // namespace tandem::engine::kv
