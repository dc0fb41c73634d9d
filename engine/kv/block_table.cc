#include "engine/kv/block_table.h"

#include <utility>

namespace tandem::engine::kv {

void BlockTable::Map(size_t first_logical) {
  if (!tracker_->enabled() || first_logical >= pages_.size()) return;
  std::vector<PageId> ids;
  ids.reserve(pages_.size() - first_logical);
  for (size_t i = first_logical; i < pages_.size(); ++i) ids.push_back(pages_[i].page);
  tracker_->MapPages(request_, static_cast<uint32_t>(first_logical), ids);
}

Status BlockTable::AdoptPrefix(std::vector<PageRef> pages) {
  if (!pages_.empty()) return Status::FailedPrecondition("a prefix can only start an empty block table");
  pages_ = std::move(pages);
  shared_pages_ = pages_.size();
  num_tokens_ = pages_.size() * page_tokens_;
  Map(0);
  return Status::Ok();
}

Status BlockTable::AppendTokens(size_t n) {
  const size_t needed_pages = (num_tokens_ + n + page_tokens_ - 1) / page_tokens_;
  const size_t first_new = pages_.size();
  if (needed_pages > first_new) RETURN_IF_ERROR(allocator_->Allocate(needed_pages - first_new, &pages_));
  num_tokens_ += n;
  Map(first_new);
  return Status::Ok();
}

std::vector<PageRef> BlockTable::TakePages() {
  tracker_->DropRequest(request_);
  num_tokens_ = 0;
  shared_pages_ = 0;
  return std::exchange(pages_, {});
}

size_t BlockTable::Release() {
  size_t stale = 0;
  for (const PageRef& ref : TakePages()) stale += !allocator_->Unref(ref).ok();
  return stale;
}

}  // namespace tandem::engine::kv
