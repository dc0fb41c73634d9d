#include "engine/kv/page_allocator.h"

#include <string>
#include <utility>

namespace tandem::engine::kv {

PageAllocator::PageAllocator(size_t num_pages, IntegrityTracker* tracker)
    : tracker_(tracker), refcount_(num_pages, 0), epoch_(num_pages, 0), free_slot_(num_pages) {
  free_list_.reserve(num_pages);
  // Lowest page ids on top of the stack: a fresh pool hands out 0, 1, 2, ...
  for (size_t i = num_pages; i-- > 0;) {
    free_slot_[i] = static_cast<uint32_t>(free_list_.size());
    free_list_.push_back(static_cast<PageId>(i));
  }
}

void PageAllocator::TakeFromFreeList(PageId page) {
  const uint32_t slot = free_slot_[page];
  const PageId last = free_list_.back();
  free_list_[slot] = last;
  free_slot_[last] = slot;
  free_list_.pop_back();
  free_slot_[page] = kInvalidPage;
}

Status PageAllocator::Allocate(size_t n, std::vector<PageRef>* out) {
  const bool forced = forced_next_ != kInvalidPage;
  if (n > free_list_.size() + (forced && refcount_[forced_next_] > 0 ? 1 : 0)) {
    return Status::ResourceExhausted("KV cache out of pages: " + std::to_string(n) + " wanted, " +
                                     std::to_string(free_list_.size()) + " free");
  }
  const size_t first = out->size();
  for (size_t i = 0; i < n; ++i) {
    PageId page;
    if (forced_next_ != kInvalidPage) {
      page = std::exchange(forced_next_, kInvalidPage);
      if (free_slot_[page] != kInvalidPage) TakeFromFreeList(page);
    } else {
      page = free_list_.back();
      TakeFromFreeList(page);
    }
    refcount_[page] = 1;
    ++epoch_[page];
    out->push_back(PageRef{page, epoch_[page]});
  }
  if (tracker_->enabled()) {
    std::vector<PageId> pages;
    pages.reserve(n);
    for (size_t i = first; i < out->size(); ++i) pages.push_back((*out)[i].page);
    tracker_->OnPagesAllocated(pages);
  }
  return Status::Ok();
}

Status PageAllocator::Ref(PageRef ref) {
  if (!IsCurrent(ref)) {
    return Status::FailedPrecondition("Ref of page " + std::to_string(ref.page) + " that the holder lost");
  }
  ++refcount_[ref.page];
  return Status::Ok();
}

Status PageAllocator::Unref(PageRef ref) {
  if (!IsCurrent(ref)) {
    return Status::FailedPrecondition("Unref of page " + std::to_string(ref.page) + " that the holder lost");
  }
  if (--refcount_[ref.page] == 0) Release(ref.page);
  return Status::Ok();
}

void PageAllocator::Release(PageId page) {
  refcount_[page] = 0;
  free_slot_[page] = static_cast<uint32_t>(free_list_.size());
  free_list_.push_back(page);
  if (tracker_->enabled()) tracker_->OnPagesFreed(std::span<const PageId>(&page, 1));
}

void PageAllocator::InjectFreeWhileMapped(PageId page) {
  if (page >= num_pages() || refcount_[page] == 0) return;
  Release(page);
}

}  // namespace tandem::engine::kv
