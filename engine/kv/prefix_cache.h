#pragma once
// Prefix cache: a radix tree over whole token pages (like SGLang's RadixAttention), one subtree
// per tenant salt, so that requests with a common prompt prefix share its KV pages.
//
// Each node below a tenant root holds one page: its key is the page's `page_tokens` token ids and
// its value a PageRef the cache holds one allocator reference to. A request that uses cached pages
// (MatchAndLock) or publishes its own (Insert) locks the path from its last node to the root;
// locked nodes are never evicted. Unlocked nodes are evictable, least recently used leaves first;
// eviction drops the cache's reference, which frees the page.
//
// Tenant isolation: salts come from the server (the authenticated tenant), never from the client.
// MakeTenantSalt length-prefixes every field, so ("org_1", "2345") and ("org_12345", "") differ.
// Subtrees of different salts are disjoint: two tenants never share a page.
//
// Thread safety: none; the step thread owns the cache (and the allocator it references).

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "engine/kv/page_allocator.h"

namespace tandem::engine::kv {

// A salt from server-side tenant fields (tenant id, key id, ...), each length-prefixed.
std::string MakeTenantSalt(std::initializer_list<std::string_view> fields);

struct PrefixCacheCounters {
  uint64_t queries = 0;       // tandem_prefix_cache_queries_total
  uint64_t hits = 0;          // queries that matched at least one page (tandem_prefix_cache_hits_total)
  uint64_t query_tokens = 0;  // whole-page tokens asked for
  uint64_t hit_tokens = 0;    // of which served from the cache
  uint64_t inserted_pages = 0;
  uint64_t evicted_pages = 0;
};

class PrefixCache {
 public:
  class Node;
  // A locked path, to be given back to Unlock exactly once. Null locks nothing.
  using Lock = Node*;

  struct Match {
    std::vector<PageRef> pages;  // logical order; one allocator reference each, for the caller
    size_t tokens = 0;           // pages.size() * page_tokens
    Lock lock = nullptr;
  };

  // `allocator` is not owned and must outlive the cache. REQUIRES: page_tokens > 0.
  PrefixCache(PageAllocator* allocator, size_t page_tokens);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The longest cached run of whole pages that prefixes `tokens` under `salt`. Takes an allocator
  // reference per matched page for the caller and locks the path (Unlock(match.lock) later).
  Match MatchAndLock(std::string_view salt, std::span<const int32_t> tokens);

  // Publishes a request's whole pages: pages[i] holds tokens [i*P, (i+1)*P). Pages whose token
  // run is already cached stay the caller's own; new nodes take a reference. Locks the path of
  // the inserted prefix and returns the lock (null when nothing was inserted or matched).
  // InvalidArgument when tokens do not fill pages.size() pages or a ref is not current.
  StatusOr<Lock> Insert(std::string_view salt, std::span<const int32_t> tokens,
                        std::span<const PageRef> pages);

  // Releases a lock from MatchAndLock or Insert. REQUIRES: each lock released once.
  void Unlock(Lock lock);

  // Evicts up to `max_pages` unlocked pages, least recently used leaves first. Returns how many.
  size_t Evict(size_t max_pages);

  size_t cached_pages() const { return cached_pages_; }
  size_t evictable_pages() const { return evictable_pages_; }
  const PrefixCacheCounters& counters() const { return counters_; }
  // True when the page is held by a node of this cache (for tests and invariant checks).
  bool Holds(PageId page) const;

 private:
  Node* FindChild(Node* parent, std::span<const int32_t> key) const;
  Node* Root(std::string_view salt, bool create);
  void LockPath(Node* node);
  void RemoveLeaf(Node* leaf);

  PageAllocator* allocator_;
  size_t page_tokens_;
  uint64_t clock_ = 0;  // logical time for LRU
  std::unordered_map<std::string, std::unique_ptr<Node>> roots_;
  std::unordered_map<PageId, Node*> page_owner_;
  size_t cached_pages_ = 0;
  size_t evictable_pages_ = 0;
  PrefixCacheCounters counters_;
};

}  // namespace tandem::engine::kv
