#pragma once
// A request's block table: its pages in logical order and how many tokens they hold. Token t of
// the request lives in pages()[t / page_tokens], slot t % page_tokens.
//
// The table keeps the integrity manifest in step: every page it gains is mapped in the tracker
// (a tail page appended is a manifest append), and Release drops the manifest.
//
// Ownership: the table holds one allocator reference per page. Thread safety: none (step thread).

#include <cstddef>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/kv/integrity_tracker.h"
#include "engine/kv/kv_types.h"
#include "engine/kv/page_allocator.h"

namespace tandem::engine::kv {

class BlockTable {
 public:
  // REQUIRES: page_tokens > 0; allocator and tracker outlive the table's use of them.
  BlockTable(RequestId request, size_t page_tokens, PageAllocator* allocator, IntegrityTracker* tracker)
      : request_(request), page_tokens_(page_tokens), allocator_(allocator), tracker_(tracker) {}

  RequestId request() const { return request_; }
  size_t num_tokens() const { return num_tokens_; }
  size_t num_pages() const { return pages_.size(); }
  std::span<const PageRef> pages() const { return pages_; }
  // Pages at the front shared from the prefix cache (not written by this request).
  size_t shared_pages() const { return shared_pages_; }

  // Takes the pages of a prefix-cache match (their references move into the table) as the first
  // `pages.size()` pages, full. FailedPrecondition unless the table is empty.
  Status AdoptPrefix(std::vector<PageRef> pages);

  // Makes room for `n` more tokens, allocating the pages that needs. All or nothing:
  // ResourceExhausted leaves the table as it was (the scheduler queues or preempts).
  Status AppendTokens(size_t n);

  // The page and slot of logical token `t`. REQUIRES: t < num_tokens().
  PageRef PageOfToken(size_t t) const { return pages_[t / page_tokens_]; }
  size_t SlotOfToken(size_t t) const { return t % page_tokens_; }

  // Gives the page references away (to release now or to park in a TransferLedger), drops the
  // manifest, and empties the table.
  std::vector<PageRef> TakePages();

  // Releases every page now. Returns how many references were stale (taken from this request by a
  // fault; nothing is freed for those).
  size_t Release();

 private:
  void Map(size_t first_logical);

  RequestId request_;
  size_t page_tokens_;
  PageAllocator* allocator_;
  IntegrityTracker* tracker_;
  std::vector<PageRef> pages_;
  size_t num_tokens_ = 0;
  size_t shared_pages_ = 0;
};

}  // namespace tandem::engine::kv
