#include "engine/kv/integrity_tracker.h"

#include "common/hash.h"

namespace tandem::engine::kv {

const char* MismatchReasonName(MismatchReason reason) {
  switch (reason) {
    case MismatchReason::kGeneration: return "generation";
    case MismatchReason::kTag: return "tag";
    case MismatchReason::kTransferTag: return "transfer_tag";
    case MismatchReason::kNoManifest: return "no_manifest";
  }
  return "unknown";
}

uint64_t PageTag(RequestId request, uint32_t logical_page, PageId page, uint64_t generation) {
  uint64_t h = SplitMix64Mix(request ^ kSplitMix64Gamma);
  h = SplitMix64Mix(h ^ ((static_cast<uint64_t>(logical_page) << 32) | page));
  h = SplitMix64Mix(h ^ generation);
  return h == 0 ? 1 : h;
}

TagTracker::TagTracker(size_t num_pages)
    : generation_(num_pages, 0), transfer_tag_(new std::atomic<uint32_t>[num_pages]), num_pages_(num_pages) {
  for (size_t i = 0; i < num_pages; ++i) transfer_tag_[i].store(0, std::memory_order_relaxed);
}

void TagTracker::OnPagesAllocated(std::span<const PageId> pages) {
  for (PageId p : pages) {
    ++generation_[p];
    transfer_tag_[p].store(0, std::memory_order_relaxed);
  }
}

void TagTracker::OnPagesFreed(std::span<const PageId> pages) {
  // Bumping on free too makes a page freed under a live mapping fail the very next check, before
  // anyone reallocates it.
  for (PageId p : pages) ++generation_[p];
}

void TagTracker::MapPages(RequestId request, uint32_t first_logical, std::span<const PageId> pages) {
  std::vector<Entry>& manifest = manifests_[request];
  if (manifest.size() < first_logical + pages.size()) manifest.resize(first_logical + pages.size());
  for (size_t i = 0; i < pages.size(); ++i) {
    const PageId p = pages[i];
    const uint32_t logical = first_logical + static_cast<uint32_t>(i);
    manifest[logical] = Entry{p, 0, generation_[p], PageTag(request, logical, p, generation_[p])};
  }
}

void TagTracker::ExpectTransferTag(RequestId request, uint32_t logical_page, uint32_t tag) {
  auto it = manifests_.find(request);
  if (it == manifests_.end() || logical_page >= it->second.size()) return;
  it->second[logical_page].transfer_tag = tag;
}

void TagTracker::StampTransferTag(PageId page, uint32_t tag) {
  if (page < num_pages_) transfer_tag_[page].store(tag, std::memory_order_release);
}

void TagTracker::DropRequest(RequestId request) { manifests_.erase(request); }

size_t TagTracker::manifest_pages(RequestId request) const {
  auto it = manifests_.find(request);
  return it == manifests_.end() ? 0 : it->second.size();
}

void TagTracker::InjectBumpGeneration(PageId page) {
  if (page < num_pages_) ++generation_[page];
}

void TagTracker::VerifyBatch(std::span<const RequestId> batch, VerifyResult* result) {
  result->failed.clear();
  result->incidents.clear();
  ++counters_.batches_verified;
  for (RequestId request : batch) {
    auto it = manifests_.find(request);
    if (it == manifests_.end()) {
      IntegrityIncident incident;
      incident.request = request;
      incident.reason = MismatchReason::kNoManifest;
      result->failed.push_back(request);
      result->incidents.push_back(incident);
      ++counters_.mismatches[static_cast<size_t>(MismatchReason::kNoManifest)];
      continue;
    }
    const Entry* entries = it->second.data();
    const size_t n = it->second.size();
    counters_.pages_checked += n;
    // The gather-and-compare: branch-free accumulation over the request's pages; the slow path
    // below only runs for a request that fails.
    uint64_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const Entry& e = entries[i];
      const uint64_t gen = generation_[e.page];
      const uint32_t landed = transfer_tag_[e.page].load(std::memory_order_acquire);
      bad |= (PageTag(request, static_cast<uint32_t>(i), e.page, gen) ^ e.tag) |
             static_cast<uint64_t>(landed ^ e.transfer_tag);
    }
    if (bad == 0) continue;
    for (size_t i = 0; i < n; ++i) {
      const Entry& e = entries[i];
      IntegrityIncident incident{
          .request = request,
          .logical_page = static_cast<uint32_t>(i),
          .physical_page = e.page,
          .reason = MismatchReason::kGeneration,
          .expected_generation = e.generation,
          .found_generation = generation_[e.page],
          .expected_transfer_tag = e.transfer_tag,
          .found_transfer_tag = transfer_tag_[e.page].load(std::memory_order_acquire),
      };
      if (incident.found_generation != e.generation) {
        incident.reason = MismatchReason::kGeneration;
      } else if (PageTag(request, incident.logical_page, e.page, e.generation) != e.tag) {
        incident.reason = MismatchReason::kTag;
      } else if (incident.found_transfer_tag != e.transfer_tag) {
        incident.reason = MismatchReason::kTransferTag;
      } else {
        continue;
      }
      ++counters_.mismatches[static_cast<size_t>(incident.reason)];
      if (result->failed.empty() || result->failed.back() != request) {
        result->failed.push_back(request);
        result->incidents.push_back(incident);
      }
    }
  }
  counters_.requests_failed += result->failed.size();
}

}  // namespace tandem::engine::kv
