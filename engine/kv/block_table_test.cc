#include "engine/kv/block_table.h"

#include <vector>

#include <gtest/gtest.h>

#include "engine/kv/prefix_cache.h"

namespace tandem::engine::kv {
namespace {

std::vector<PageId> Ids(std::span<const PageRef> refs) {
  std::vector<PageId> out;
  for (const PageRef& r : refs) out.push_back(r.page);
  return out;
}

TEST(BlockTableTest, AppendAllocatesOnlyWhenTheTailPageIsFull) {
  TagTracker tags(8);
  PageAllocator alloc(8, &tags);
  BlockTable table(1, 4, &alloc, &tags);
  ASSERT_TRUE(table.AppendTokens(3).ok());
  EXPECT_EQ(table.num_pages(), 1u);
  ASSERT_TRUE(table.AppendTokens(1).ok());
  EXPECT_EQ(table.num_pages(), 1u);
  ASSERT_TRUE(table.AppendTokens(1).ok());  // token 4 opens page 2: a manifest append
  EXPECT_EQ(table.num_pages(), 2u);
  EXPECT_EQ(tags.manifest_pages(1), 2u);
  EXPECT_EQ(table.PageOfToken(4), table.pages()[1]);
  EXPECT_EQ(table.SlotOfToken(6), 2u);
  const std::vector<PageId> pages = Ids(table.pages());
  const std::vector<RequestPages> batch = {{1, pages}};
  VerifyResult result;
  tags.VerifyBatch(batch, &result);
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(table.Release(), 0u);
  EXPECT_EQ(alloc.free_pages(), 8u);
  EXPECT_EQ(tags.manifest_pages(1), 0u);
}

TEST(BlockTableTest, OutOfPagesIsResourceExhaustedAndChangesNothing) {
  NoopTracker noop;
  PageAllocator alloc(2, &noop);
  BlockTable table(1, 4, &alloc, &noop);
  ASSERT_TRUE(table.AppendTokens(5).ok());
  EXPECT_EQ(table.AppendTokens(4).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(table.num_tokens(), 5u);
  EXPECT_EQ(table.num_pages(), 2u);
  ASSERT_TRUE(table.AppendTokens(3).ok());  // still fits the tail page
  EXPECT_EQ(table.Release(), 0u);
}

TEST(BlockTableTest, AdoptsAPrefixCacheMatch) {
  TagTracker tags(8);
  PageAllocator alloc(8, &tags);
  PrefixCache cache(&alloc, 2);
  const std::string salt = MakeTenantSalt({"t"});
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  {
    BlockTable first(1, 2, &alloc, &tags);
    ASSERT_TRUE(first.AppendTokens(prompt.size()).ok());
    auto lock = cache.Insert(salt, prompt, first.pages().subspan(0, 2));
    ASSERT_TRUE(lock.ok());
    cache.Unlock(*lock);
    EXPECT_EQ(first.Release(), 0u);
  }
  auto match = cache.MatchAndLock(salt, prompt);
  ASSERT_EQ(match.pages.size(), 2u);
  BlockTable second(2, 2, &alloc, &tags);
  ASSERT_TRUE(second.AdoptPrefix(match.pages).ok());
  EXPECT_EQ(second.AdoptPrefix(match.pages).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(second.shared_pages(), 2u);
  ASSERT_TRUE(second.AppendTokens(1).ok());  // the 5th token: a page of its own
  EXPECT_EQ(second.num_pages(), 3u);
  const std::vector<PageId> pages = Ids(second.pages());
  const std::vector<RequestPages> batch = {{2, pages}};
  VerifyResult result;
  tags.VerifyBatch(batch, &result);
  EXPECT_TRUE(result.ok());
  cache.Unlock(match.lock);
  EXPECT_EQ(second.Release(), 0u);
  EXPECT_EQ(cache.Evict(8), 2u);
  EXPECT_EQ(alloc.free_pages(), 8u);
}

TEST(BlockTableTest, ReleaseSkipsPagesAFaultTookAway) {
  NoopTracker noop;
  PageAllocator alloc(4, &noop);
  BlockTable victim(1, 4, &alloc, &noop);
  ASSERT_TRUE(victim.AppendTokens(8).ok());
  alloc.InjectHandOutNext(victim.pages()[0].page);
  BlockTable other(2, 4, &alloc, &noop);
  ASSERT_TRUE(other.AppendTokens(1).ok());
  EXPECT_EQ(victim.Release(), 1u);
  EXPECT_EQ(alloc.refcount(other.pages()[0].page), 1u);  // the new owner keeps its page
  EXPECT_EQ(other.Release(), 0u);
  EXPECT_EQ(alloc.free_pages(), 4u);
}

}  // namespace
}  // namespace tandem::engine::kv
