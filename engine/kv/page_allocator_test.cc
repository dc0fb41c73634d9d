#include "engine/kv/page_allocator.h"

#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::engine::kv {
namespace {

TEST(PageAllocatorTest, AllocatesDistinctPagesUntilExhausted) {
  NoopTracker noop;
  PageAllocator alloc(8, &noop);
  std::vector<PageRef> refs;
  ASSERT_TRUE(alloc.Allocate(5, &refs).ok());
  ASSERT_TRUE(alloc.Allocate(3, &refs).ok());
  std::set<PageId> pages;
  for (const PageRef& r : refs) pages.insert(r.page);
  EXPECT_EQ(pages.size(), 8u);
  EXPECT_EQ(alloc.free_pages(), 0u);
  Status s = alloc.Allocate(1, &refs);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refs.size(), 8u);  // untouched on failure
}

TEST(PageAllocatorTest, AllOrNothing) {
  NoopTracker noop;
  PageAllocator alloc(4, &noop);
  std::vector<PageRef> refs;
  ASSERT_TRUE(alloc.Allocate(3, &refs).ok());
  EXPECT_EQ(alloc.Allocate(2, &refs).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(alloc.free_pages(), 1u);
}

TEST(PageAllocatorTest, RefcountsFreeAtZero) {
  NoopTracker noop;
  PageAllocator alloc(2, &noop);
  std::vector<PageRef> refs;
  ASSERT_TRUE(alloc.Allocate(1, &refs).ok());
  const PageRef r = refs[0];
  ASSERT_TRUE(alloc.Ref(r).ok());
  EXPECT_EQ(alloc.refcount(r.page), 2u);
  ASSERT_TRUE(alloc.Unref(r).ok());
  EXPECT_EQ(alloc.free_pages(), 1u);
  ASSERT_TRUE(alloc.Unref(r).ok());
  EXPECT_EQ(alloc.free_pages(), 2u);
  // A third release is refused, not a negative refcount.
  EXPECT_EQ(alloc.Unref(r).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(alloc.Ref(r).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(alloc.refcount(r.page), 0u);
}

TEST(PageAllocatorTest, StaleRefCannotFreeTheNewOwnersPage) {
  NoopTracker noop;
  PageAllocator alloc(1, &noop);
  std::vector<PageRef> a, b;
  ASSERT_TRUE(alloc.Allocate(1, &a).ok());
  ASSERT_TRUE(alloc.Unref(a[0]).ok());
  ASSERT_TRUE(alloc.Allocate(1, &b).ok());
  EXPECT_EQ(a[0].page, b[0].page);
  EXPECT_NE(a[0].epoch, b[0].epoch);
  EXPECT_EQ(alloc.Unref(a[0]).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(alloc.refcount(b[0].page), 1u);
}

TEST(PageAllocatorTest, TagTrackerSeesEveryAllocationAndFree) {
  TagTracker tags(4);
  PageAllocator alloc(4, &tags);
  std::vector<PageRef> refs;
  ASSERT_TRUE(alloc.Allocate(2, &refs).ok());
  EXPECT_EQ(tags.generation(refs[0].page), 1u);
  ASSERT_TRUE(alloc.Unref(refs[0]).ok());
  EXPECT_EQ(tags.generation(refs[0].page), 2u);
  std::vector<PageRef> again;
  ASSERT_TRUE(alloc.Allocate(1, &again).ok());
  EXPECT_EQ(again[0].page, refs[0].page);  // LIFO reuse
  EXPECT_EQ(tags.generation(again[0].page), 3u);
}

TEST(PageAllocatorTest, InjectedFaultsKeepTheCountsConsistent) {
  NoopTracker noop;
  PageAllocator alloc(3, &noop);
  std::vector<PageRef> a;
  ASSERT_TRUE(alloc.Allocate(2, &a).ok());
  alloc.InjectHandOutNext(a[0].page);
  std::vector<PageRef> b;
  ASSERT_TRUE(alloc.Allocate(2, &b).ok());
  EXPECT_EQ(b[0].page, a[0].page);
  EXPECT_FALSE(alloc.IsCurrent(a[0]));
  EXPECT_EQ(alloc.free_pages(), 0u);
  alloc.InjectFreeWhileMapped(a[1].page);
  EXPECT_EQ(alloc.free_pages(), 1u);
  EXPECT_EQ(alloc.Unref(a[1]).code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tandem::engine::kv
