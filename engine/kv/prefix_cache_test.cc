#include "engine/kv/prefix_cache.h"

#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::engine::kv {
namespace {

constexpr size_t kP = 4;  // tokens per page in these tests

std::vector<int32_t> Tokens(std::initializer_list<int32_t> t) { return t; }

class PrefixCacheTest : public ::testing::Test {
 protected:
  NoopTracker noop_;
  PageAllocator alloc_{32, &noop_};
  PrefixCache cache_{&alloc_, kP};

  // A request that computed `tokens` in its own pages and publishes them, then finishes.
  std::vector<PageRef> PublishAndFinish(std::string_view salt, const std::vector<int32_t>& tokens) {
    std::vector<PageRef> pages;
    EXPECT_TRUE(alloc_.Allocate(tokens.size() / kP, &pages).ok());
    auto lock = cache_.Insert(salt, tokens, pages);
    EXPECT_TRUE(lock.ok());
    cache_.Unlock(*lock);
    for (const PageRef& r : pages) EXPECT_TRUE(alloc_.Unref(r).ok());
    return pages;
  }
};

TEST_F(PrefixCacheTest, SaltFieldsAreLengthPrefixed) {
  EXPECT_NE(MakeTenantSalt({"org_1", "2345"}), MakeTenantSalt({"org_12345", ""}));
  EXPECT_NE(MakeTenantSalt({"a", "bc"}), MakeTenantSalt({"ab", "c"}));
  EXPECT_EQ(MakeTenantSalt({"org_1", "2345"}), MakeTenantSalt({"org_1", "2345"}));
}

TEST_F(PrefixCacheTest, MatchSharesWholePagesAndCountsHits) {
  const std::string salt = MakeTenantSalt({"t1"});
  const auto tokens = Tokens({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  std::vector<PageRef> published = PublishAndFinish(salt, tokens);  // 2 whole pages
  EXPECT_EQ(cache_.cached_pages(), 2u);
  EXPECT_EQ(cache_.evictable_pages(), 2u);
  EXPECT_EQ(alloc_.free_pages(), 30u);

  auto m = cache_.MatchAndLock(salt, Tokens({1, 2, 3, 4, 5, 6, 7, 8, 99}));
  ASSERT_EQ(m.pages.size(), 2u);
  EXPECT_EQ(m.tokens, 8u);
  EXPECT_EQ(m.pages[0], published[0]);
  EXPECT_EQ(alloc_.refcount(m.pages[0].page), 2u);
  EXPECT_EQ(cache_.evictable_pages(), 0u);
  EXPECT_EQ(cache_.Evict(10), 0u);  // locked: nothing to evict
  cache_.Unlock(m.lock);
  for (const PageRef& r : m.pages) ASSERT_TRUE(alloc_.Unref(r).ok());

  auto partial = cache_.MatchAndLock(salt, Tokens({1, 2, 3, 4, 0, 0, 0, 0}));
  EXPECT_EQ(partial.pages.size(), 1u);
  cache_.Unlock(partial.lock);
  for (const PageRef& r : partial.pages) ASSERT_TRUE(alloc_.Unref(r).ok());

  auto miss = cache_.MatchAndLock(salt, Tokens({9, 9, 9, 9}));
  EXPECT_TRUE(miss.pages.empty());
  EXPECT_EQ(miss.lock, nullptr);
  EXPECT_EQ(cache_.counters().queries, 3u);
  EXPECT_EQ(cache_.counters().hits, 2u);
  EXPECT_EQ(cache_.counters().hit_tokens, 12u);
}

TEST_F(PrefixCacheTest, EvictsLeastRecentlyUsedLeavesFirst) {
  const std::string salt = MakeTenantSalt({"t"});
  std::vector<PageRef> a = PublishAndFinish(salt, Tokens({1, 1, 1, 1, 2, 2, 2, 2}));
  std::vector<PageRef> b = PublishAndFinish(salt, Tokens({3, 3, 3, 3}));
  // Touch a: b is now the least recently used.
  auto m = cache_.MatchAndLock(salt, Tokens({1, 1, 1, 1, 2, 2, 2, 2}));
  cache_.Unlock(m.lock);
  for (const PageRef& r : m.pages) ASSERT_TRUE(alloc_.Unref(r).ok());
  EXPECT_EQ(cache_.Evict(1), 1u);
  EXPECT_FALSE(cache_.Holds(b[0].page));
  EXPECT_TRUE(cache_.Holds(a[1].page));
  // Next the leaf of a, then its parent once it became a leaf.
  EXPECT_EQ(cache_.Evict(5), 2u);
  EXPECT_EQ(cache_.cached_pages(), 0u);
  EXPECT_EQ(alloc_.free_pages(), 32u);
  auto gone = cache_.MatchAndLock(salt, Tokens({1, 1, 1, 1}));
  EXPECT_TRUE(gone.pages.empty());  // no hit after eviction
}

TEST_F(PrefixCacheTest, DuplicateInsertKeepsTheCallersPage) {
  const std::string salt = MakeTenantSalt({"t"});
  PublishAndFinish(salt, Tokens({5, 5, 5, 5}));
  std::vector<PageRef> mine;
  ASSERT_TRUE(alloc_.Allocate(1, &mine).ok());
  auto lock = cache_.Insert(salt, Tokens({5, 5, 5, 5}), mine);
  ASSERT_TRUE(lock.ok());
  EXPECT_FALSE(cache_.Holds(mine[0].page));
  EXPECT_EQ(alloc_.refcount(mine[0].page), 1u);
  cache_.Unlock(*lock);
  ASSERT_TRUE(alloc_.Unref(mine[0]).ok());
  EXPECT_EQ(cache_.Insert(salt, Tokens({1, 2}), mine).status().code(), StatusCode::kInvalidArgument);
}

// The tenant test of issue 4: 10^4 probes over prompts that several tenants share word for word.
// No probe ever sees another tenant's page; a tenant re-asking its own prefixes hits > 90%.
TEST(PrefixCacheTenantTest, TenantsNeverShareAndRepeatsHit) {
  constexpr size_t kTenants = 8, kPrompts = 6, kPages = 4096, kPromptPages = 8;
  NoopTracker noop;
  PageAllocator alloc(kPages, &noop);
  PrefixCache cache(&alloc, kP);
  std::vector<std::string> salts;
  for (size_t t = 0; t < kTenants; ++t) salts.push_back(MakeTenantSalt({"org_" + std::to_string(t), "key"}));
  // The same prompts for every tenant: only the salt tells them apart.
  std::vector<std::vector<int32_t>> prompts(kPrompts);
  for (size_t p = 0; p < kPrompts; ++p) {
    for (size_t i = 0; i < kPromptPages * kP; ++i) prompts[p].push_back(static_cast<int32_t>(p * 1000 + i));
  }
  std::vector<int> page_tenant(kPages, -1);  // which tenant's request wrote the page
  std::mt19937 rng(7);
  size_t probes = 0, cross = 0, repeats = 0, repeat_hits = 0;
  std::set<std::pair<size_t, size_t>> seen;
  for (; probes < 10000; ++probes) {
    const size_t t = rng() % kTenants, p = rng() % kPrompts;
    auto m = cache.MatchAndLock(salts[t], prompts[p]);
    for (const PageRef& r : m.pages) cross += page_tenant[r.page] != static_cast<int>(t);
    const bool repeat = !seen.insert({t, p}).second;
    repeats += repeat;
    repeat_hits += repeat && m.pages.size() == kPromptPages;
    // Compute the rest in fresh pages and publish them.
    std::vector<PageRef> own;
    ASSERT_TRUE(alloc.Allocate(kPromptPages - m.pages.size(), &own).ok());
    for (const PageRef& r : own) page_tenant[r.page] = static_cast<int>(t);
    std::vector<PageRef> all = m.pages;
    all.insert(all.end(), own.begin(), own.end());
    auto lock = cache.Insert(salts[t], prompts[p], all);
    ASSERT_TRUE(lock.ok());
    cache.Unlock(m.lock);
    cache.Unlock(*lock);
    for (const PageRef& r : all) ASSERT_TRUE(alloc.Unref(r).ok());
    if (rng() % 50 == 0) cache.Evict(kPromptPages);  // some pressure: evicted prefixes miss once
  }
  EXPECT_EQ(cross, 0u);
  const double rate = static_cast<double>(repeat_hits) / static_cast<double>(repeats);
  std::printf("tenant test: %zu probes, %zu cross-tenant hits, same-tenant repeat hit rate %.4f\n", probes,
              cross, rate);
  EXPECT_GT(rate, 0.90);
  EXPECT_EQ(cache.counters().queries, probes);
}

}  // namespace
}  // namespace tandem::engine::kv
