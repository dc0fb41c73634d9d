#pragma once
// Hands out physical pages of a PagePool and counts references to them.
//
// A page is free (on the free list) or held (refcount > 0). Holders are requests' block tables,
// the prefix cache, and the transfer ledger for pages whose release is deferred. Every allocation
// bumps the page's epoch; a holder keeps (page, epoch) in a PageRef, and releasing a stale ref (the
// page was taken from it, which only a bug or an injected fault does) is refused instead of
// dropping the new owner's reference. The integrity tracker hears every allocation and free.
//
// Thread safety: none; the engine's step thread owns the allocator.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/kv/integrity_tracker.h"
#include "engine/kv/kv_types.h"

namespace tandem::engine::kv {

// A holder's reference to a page, valid while the page's epoch is unchanged.
struct PageRef {
  PageId page = kInvalidPage;
  uint32_t epoch = 0;
  friend bool operator==(const PageRef&, const PageRef&) = default;
};

class PageAllocator {
 public:
  // `tracker` is not owned, must outlive the allocator, and may be a NoopTracker.
  // REQUIRES: num_pages < kInvalidPage.
  PageAllocator(size_t num_pages, IntegrityTracker* tracker);

  size_t num_pages() const { return refcount_.size(); }
  size_t free_pages() const { return free_list_.size(); }
  size_t held_pages() const { return num_pages() - free_pages(); }

  // Allocates `n` pages, each with refcount 1, appending their refs to `out`. All or nothing:
  // ResourceExhausted (and `out` untouched) when fewer than `n` pages are free.
  Status Allocate(size_t n, std::vector<PageRef>* out);

  // Adds a holder to a held page. FailedPrecondition for a free page or a stale ref.
  Status Ref(PageRef ref);

  // Drops one holder; the page returns to the free list at refcount 0. FailedPrecondition for a
  // stale ref or a free page (nothing changes: a bug elsewhere must not free a stranger's page).
  Status Unref(PageRef ref);

  uint32_t refcount(PageId page) const { return refcount_[page]; }
  uint32_t epoch(PageId page) const { return epoch_[page]; }
  bool IsCurrent(PageRef ref) const {
    return ref.page < num_pages() && refcount_[ref.page] > 0 && epoch_[ref.page] == ref.epoch;
  }

  // ---- Fault injection, for tests only (no cost unless used) ----
  // Frees a held page at once, whoever still maps it (use after free).
  void InjectFreeWhileMapped(PageId page);
  // The next Allocate hands out `page` first, even though it is held (double allocation): its
  // old holders' refs go stale.
  void InjectHandOutNext(PageId page) { forced_next_ = page; }

 private:
  void TakeFromFreeList(PageId page);
  void Release(PageId page);

  IntegrityTracker* tracker_;
  std::vector<uint32_t> refcount_;
  std::vector<uint32_t> epoch_;
  std::vector<PageId> free_list_;      // LIFO: recently freed pages are reused first
  std::vector<uint32_t> free_slot_;    // position in free_list_, or kInvalidPage when held
  PageId forced_next_ = kInvalidPage;  // fault injection
};

}  // namespace tandem::engine::kv
