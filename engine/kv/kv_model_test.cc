// Model-based random test of the KV bookkeeping (issue 4): allocator + prefix cache + integrity
// tracker + transfer ledger driven by >= 10^6 random operations (alloc, append, share, lock,
// unlock, evict, abort, free, late write, transfer end) and compared after every operation with a
// plain reference model. Invariants: refcounts match the model (never negative: a refused Unref
// fails the test); no referenced or locked page is evicted; free + evictable + in use == total;
// no hit after eviction (every match equals the model's longest cached prefix); the integrity
// check passes for every live request (no fault is injected here).

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/clock.h"
#include "engine/kv/integrity_tracker.h"
#include "engine/kv/page_allocator.h"
#include "engine/kv/prefix_cache.h"
#include "engine/kv/transfer_ledger.h"

namespace tandem::engine::kv {
namespace {

constexpr size_t kPages = 128, kP = 2, kTenants = 3, kMaxRequests = 24;

struct ModelRequest {
  std::string salt;
  std::vector<int32_t> tokens;  // whole pages only
  std::vector<PageRef> refs;    // one per page, logical order
  std::vector<PrefixCache::Lock> locks;
  std::vector<size_t> lock_pages;                // pages covered by each lock (model side)
  std::vector<std::vector<PageRef>> extra_refs;  // "lock" op: extra matches held...
  std::vector<PrefixCache::Lock> extra_locks;    // ...with their locks
  std::vector<size_t> extra_lock_pages;
  size_t matched = 0;  // refs[0, matched) came from the prefix cache
  bool transfer = false;
  uint64_t transfer_id = 0;
};

struct CacheEntry {
  PageRef page;
  int lock = 0;
};

class KvModel {
 public:
  KvModel() : tags_(kPages), alloc_(kPages, &tags_), cache_(&alloc_, kP), ledger_(&clock_), rng_(12345) {}

  void Run(size_t ops) {
    for (size_t i = 0; i < ops; ++i) {
      Op();
      CheckCounts();
      if (i % 997 == 0) CheckFull();
      if (::testing::Test::HasFatalFailure()) return;
    }
    // Drain: everything back to the pool.
    while (!requests_.empty()) End(requests_.begin()->first);
    for (auto& [id, t] : transfers_) ASSERT_TRUE(ledger_.Finish(id, TransferState::kDone).ok());
    transfers_.clear();
    Reclaim();
    cache_.Evict(kPages);
    SyncEvicted(kPages);
    CheckFull();
    EXPECT_EQ(alloc_.free_pages(), kPages);
    // The run must have exercised every path it claims to.
    const PrefixCacheCounters& c = cache_.counters();
    const TransferLedgerCounters t = ledger_.counters();
    std::printf(
        "model: %zu ops, %llu queries, %llu hits, %llu evicted, %zu out-of-pages, %llu deferred pages, "
        "%llu timed out, %llu pages verified\n",
        ops, static_cast<unsigned long long>(c.queries), static_cast<unsigned long long>(c.hits),
        static_cast<unsigned long long>(c.evicted_pages), exhausted_,
        static_cast<unsigned long long>(t.deferred_pages), static_cast<unsigned long long>(t.timed_out),
        static_cast<unsigned long long>(tags_.counters().pages_checked));
    if (ops >= 10000) {
      EXPECT_GT(c.hits, 0u);
      EXPECT_GT(c.evicted_pages, 0u);
      EXPECT_GT(exhausted_, 0u);
      EXPECT_GT(t.deferred_pages, 0u);
      EXPECT_GT(t.timed_out, 0u);
    }
  }

 private:
  std::string Key(const std::string& salt, const std::vector<int32_t>& tokens, size_t pages) const {
    std::string k = salt + '|';
    for (size_t i = 0; i < pages * kP; ++i) k += std::to_string(tokens[i]) + ',';
    return k;
  }

  std::vector<int32_t> RandomPages(size_t n) {
    std::vector<int32_t> t;
    for (size_t i = 0; i < n * kP; ++i) t.push_back(static_cast<int32_t>(rng_() % 3));
    return t;
  }

  // The model's longest cached prefix.
  size_t ModelMatch(const std::string& salt, const std::vector<int32_t>& tokens) const {
    size_t n = 0;
    while (n < tokens.size() / kP && cache_model_.count(Key(salt, tokens, n + 1))) ++n;
    return n;
  }

  void ModelLock(const std::string& salt, const std::vector<int32_t>& tokens, size_t n, int delta) {
    for (size_t i = 1; i <= n; ++i) {
      CacheEntry& e = cache_model_.at(Key(salt, tokens, i));
      e.lock += delta;
      page_locks_[e.page.page] += delta;
    }
  }

  // A real match, checked against the model; locks and refs are added to `req` as an extra hold
  // when `extra`, else become the request's first pages.
  size_t Match(ModelRequest& req, const std::vector<int32_t>& tokens, bool extra) {
    auto m = cache_.MatchAndLock(req.salt, tokens);
    const size_t n = ModelMatch(req.salt, tokens);
    EXPECT_EQ(m.pages.size(), n) << "match differs from the model (hit after eviction?)";
    for (size_t i = 0; i < std::min(n, m.pages.size()); ++i) {
      EXPECT_EQ(m.pages[i], cache_model_.at(Key(req.salt, tokens, i + 1)).page);
    }
    for (const PageRef& r : m.pages) ++req_refs_[r.page];
    ModelLock(req.salt, tokens, m.pages.size(), +1);
    if (extra) {
      req.extra_refs.push_back(m.pages);
      req.extra_locks.push_back(m.lock);
      req.extra_lock_pages.push_back(m.pages.size());
    } else {
      req.refs = m.pages;
      req.locks.push_back(m.lock);
      req.lock_pages.push_back(m.pages.size());
    }
    return m.pages.size();
  }

  bool AllocPages(size_t n, std::vector<PageRef>* out) {
    const Status s = alloc_.Allocate(n, out);
    if (s.ok()) return true;
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
    EXPECT_LT(alloc_.free_pages(), n);
    ++exhausted_;
    return false;
  }

  void NewRequest() {
    if (requests_.size() >= kMaxRequests) return;
    const RequestId id = next_id_++;
    ModelRequest req;
    req.salt = "tenant" + std::to_string(rng_() % kTenants);
    std::vector<int32_t> tokens = RandomPages(1 + rng_() % 5);
    const size_t matched = Match(req, tokens, false);
    req.matched = matched;
    std::vector<PageRef> own;
    if (!AllocPages(tokens.size() / kP - matched, &own)) {
      requests_[id] = std::move(req);
      requests_[id].tokens.assign(tokens.begin(), tokens.begin() + matched * kP);
      End(id);  // rejected: out of pages
      return;
    }
    for (const PageRef& r : own) ++req_refs_[r.page];
    req.refs.insert(req.refs.end(), own.begin(), own.end());
    req.tokens = tokens;
    std::vector<PageId> ids;
    for (const PageRef& r : req.refs) ids.push_back(r.page);
    tags_.MapPages(id, 0, ids);
    if (rng_() % 4 == 0) {
      req.transfer = true;
      req.transfer_id = next_transfer_++;
      ASSERT_TRUE(ledger_.Begin(req.transfer_id, id, 1 + rng_() % 50).ok());
      transfers_[req.transfer_id] = id;
    }
    requests_[id] = std::move(req);
  }

  void Append(ModelRequest& req, RequestId id) {
    std::vector<PageRef> page;
    if (!AllocPages(1, &page)) return;
    ++req_refs_[page[0].page];
    req.refs.push_back(page[0]);
    std::vector<int32_t> more = RandomPages(1);
    req.tokens.insert(req.tokens.end(), more.begin(), more.end());
    const PageId p = page[0].page;
    tags_.MapPages(id, static_cast<uint32_t>(req.refs.size() - 1), std::span<const PageId>(&p, 1));
  }

  // Only final KV may be published: not pages a transfer is still writing.
  void Share(ModelRequest& req) {
    if (req.transfer && transfers_.count(req.transfer_id)) return;
    auto lock = cache_.Insert(req.salt, req.tokens, req.refs);
    ASSERT_TRUE(lock.ok());
    const size_t n = req.refs.size();
    for (size_t i = 1; i <= n; ++i) {
      const std::string k = Key(req.salt, req.tokens, i);
      if (!cache_model_.count(k)) {
        cache_model_[k] = CacheEntry{req.refs[i - 1], 0};
        in_cache_[req.refs[i - 1].page] = true;
      }
    }
    ModelLock(req.salt, req.tokens, n, +1);
    req.locks.push_back(*lock);
    req.lock_pages.push_back(n);
    EXPECT_EQ(*lock != nullptr, n > 0);
  }

  void UnlockOne(ModelRequest& req, size_t i) {
    cache_.Unlock(req.locks[i]);
    ModelLock(req.salt, req.tokens, req.lock_pages[i], -1);
  }

  void DropExtra(ModelRequest& req) {
    if (req.extra_refs.empty()) return;
    cache_.Unlock(req.extra_locks.back());
    ModelLock(req.salt, req.tokens, req.extra_lock_pages.back(), -1);
    req.extra_locks.pop_back();
    req.extra_lock_pages.pop_back();
    for (const PageRef& r : req.extra_refs.back()) Unref(r);
    req.extra_refs.pop_back();
  }

  void Unref(PageRef r) {
    ASSERT_GT(req_refs_[r.page], 0) << "model refcount would go negative";
    --req_refs_[r.page];
    ASSERT_TRUE(alloc_.Unref(r).ok()) << "refcount would go negative";
  }

  // Finishes or aborts a request: locks released, pages released or parked.
  void End(RequestId id) {
    ModelRequest& req = requests_.at(id);
    while (!req.extra_refs.empty()) DropExtra(req);
    for (size_t i = 0; i < req.locks.size(); ++i) UnlockOne(req, i);
    tags_.DropRequest(id);
    // Whether finished or aborted, pages a transfer may still write wait for its terminal state.
    const bool in_flight = req.transfer && transfers_.count(req.transfer_id);
    // Pages the transfer writes wait for its terminal state; cached prefix pages it does not
    // write go back now.
    const std::vector<PageRef> written(req.refs.begin() + static_cast<ptrdiff_t>(req.matched),
                                       req.refs.end());
    if (in_flight && ledger_.DeferRelease(id, written)) {
      for (size_t i = 0; i < req.matched; ++i) Unref(req.refs[i]);
      for (const PageRef& r : written) parked_.push_back(r);
    } else {
      for (const PageRef& r : req.refs) Unref(r);
    }
    requests_.erase(id);
  }

  void Reclaim() {
    for (const PageRef& r : ledger_.TakeReleasable()) {
      auto it = std::find(parked_.begin(), parked_.end(), r);
      ASSERT_NE(it, parked_.end());
      parked_.erase(it);
      Unref(r);
    }
  }

  void EndTransfer() {
    if (transfers_.empty()) return;
    auto it = transfers_.begin();
    std::advance(it, rng_() % transfers_.size());
    const uint64_t id = it->first;
    const TransferState s = rng_() % 2 ? TransferState::kDone : TransferState::kFailed;
    ASSERT_TRUE(ledger_.Finish(id, s).ok());
    EXPECT_FALSE(ledger_.Finish(id, TransferState::kDone).ok()) << "second terminal state accepted";
    transfers_.erase(it);
    Reclaim();
  }

  void Expire() {
    clock_.AdvanceMillis(10);
    ledger_.ExpireOverdue();
    for (auto it = transfers_.begin(); it != transfers_.end();) {
      const RequestId r = it->second;
      if (!ledger_.InFlight(r)) {
        it = transfers_.erase(it);
      } else {
        ++it;
      }
    }
    Reclaim();
  }

  void LateWrite() {
    if (parked_.empty()) return;
    // A write of the aborted transfer lands in a parked page: nobody maps it, nobody fails.
    tags_.StampTransferTag(parked_[rng_() % parked_.size()].page, 0xdead);
  }

  // Removes from the model what Evict removed, checking that each was unlocked and a leaf.
  void SyncEvicted(size_t asked) {
    size_t removed = 0;
    for (auto it = cache_model_.begin(); it != cache_model_.end();) {
      if (cache_.Holds(it->second.page.page) && alloc_.IsCurrent(it->second.page)) {
        ++it;
        continue;
      }
      EXPECT_EQ(it->second.lock, 0) << "a locked page was evicted";
      EXPECT_EQ(req_refs_[it->second.page.page], 0) << "a referenced page was evicted";
      in_cache_[it->second.page.page] = false;
      it = cache_model_.erase(it);
      ++removed;
    }
    EXPECT_LE(removed, asked);
    last_removed_ = removed;
  }

  void Evict() {
    const size_t n = 1 + rng_() % 8;
    const size_t got = cache_.Evict(n);
    SyncEvicted(n);
    EXPECT_EQ(got, last_removed_);
  }

  // A live request with a transfer in flight, else `fallback`.
  RequestId ReceivingRequest(RequestId fallback) const {
    for (const auto& [transfer, request] : transfers_) {
      if (requests_.count(request)) return request;
    }
    return fallback;
  }

  RequestId RandomRequest() {
    auto it = requests_.begin();
    std::advance(it, rng_() % requests_.size());
    return it->first;
  }

  void Op() {
    const uint32_t op = rng_() % 100;
    last_op_ = op;
    if (requests_.empty() || op < 20) return NewRequest();
    const RequestId id = RandomRequest();
    ModelRequest& req = requests_.at(id);
    if (op < 35) return Append(req, id);
    if (op < 45) return Share(req);
    if (op < 52) {  // lock: hold another match of this tenant's prompt
      const std::vector<int32_t> tokens = req.tokens;
      Match(req, tokens, /*extra=*/true);
      return;
    }
    if (op < 59) return DropExtra(req);
    if (op < 66) return Evict();
    if (op < 72) return End(ReceivingRequest(id));  // abort, mid-transfer when there is one
    if (op < 82) return End(id);
    if (op < 88) return EndTransfer();
    if (op < 92) return Expire();
    if (op < 96) return LateWrite();
    return Verify();
  }

  void Verify() {
    std::vector<std::vector<PageId>> lists;
    std::vector<RequestPages> batch;
    lists.reserve(requests_.size());
    for (const auto& [id, req] : requests_) {
      std::vector<PageId>& list = lists.emplace_back();
      for (const PageRef& r : req.refs) list.push_back(r.page);
      batch.push_back({id, list});
    }
    VerifyResult result;
    tags_.VerifyBatch(batch, &result);
    EXPECT_TRUE(result.ok()) << "integrity failure without a fault: request " << result.failed[0];
  }

  void CheckCounts() {
    size_t in_use = 0;
    for (size_t p = 0; p < kPages; ++p) in_use += req_refs_[p] > 0 || (in_cache_[p] && page_locks_[p] > 0);
    ASSERT_EQ(alloc_.free_pages() + cache_.evictable_pages() + in_use, kPages)
        << "op " << last_op_ << " free " << alloc_.free_pages() << " evictable " << cache_.evictable_pages()
        << " in use " << in_use;
    ASSERT_EQ(cache_.cached_pages(), cache_model_.size());
  }

  void CheckFull() {
    size_t unlocked = 0;
    for (const auto& [k, e] : cache_model_) unlocked += e.lock == 0;
    ASSERT_EQ(cache_.evictable_pages(), unlocked);
    for (size_t p = 0; p < kPages; ++p) {
      ASSERT_EQ(alloc_.refcount(static_cast<PageId>(p)),
                static_cast<uint32_t>(req_refs_[p] + (in_cache_[p] ? 1 : 0)))
          << "page " << p;
    }
    for (const auto& [id, req] : requests_) {
      for (const PageRef& r : req.refs) ASSERT_TRUE(alloc_.IsCurrent(r));
    }
    Verify();
  }

  TagTracker tags_;
  PageAllocator alloc_;
  PrefixCache cache_;
  FakeClock clock_;
  TransferLedger ledger_;
  std::mt19937_64 rng_;
  std::map<RequestId, ModelRequest> requests_;
  std::map<std::string, CacheEntry> cache_model_;
  std::map<uint64_t, RequestId> transfers_;
  std::vector<PageRef> parked_;
  int req_refs_[kPages] = {};
  bool in_cache_[kPages] = {};
  int page_locks_[kPages] = {};  // locks on the cache entry holding the page
  size_t last_removed_ = 0;
  uint32_t last_op_ = 0;
  size_t exhausted_ = 0;
  RequestId next_id_ = 1;
  uint64_t next_transfer_ = 1;
};

// engine_kv_test (label unit, run under ASan in CI) does 2*10^5 operations; the same file built as
// engine_kv_model_slow_test (label slow) does the 10^6. TANDEM_KV_MODEL_OPS overrides both.
#ifndef TANDEM_KV_MODEL_OPS
#define TANDEM_KV_MODEL_OPS 200000
#endif

size_t OpsFromEnv() {
  const char* v = std::getenv("TANDEM_KV_MODEL_OPS");
  return v != nullptr ? std::strtoull(v, nullptr, 10) : size_t{TANDEM_KV_MODEL_OPS};
}

TEST(KvModelTest, RandomOperationsMatchTheReferenceModel) {
  KvModel model;
  model.Run(OpsFromEnv());
}

}  // namespace
}  // namespace tandem::engine::kv
