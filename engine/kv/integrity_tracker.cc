#include "engine/kv/integrity_tracker.h"

#include <algorithm>

#include "common/hash.h"

namespace tandem::engine::kv {

const char* MismatchReasonName(MismatchReason reason) {
  switch (reason) {
    case MismatchReason::kGeneration: return "generation";
    case MismatchReason::kTag: return "tag";
    case MismatchReason::kTransferTag: return "transfer_tag";
    case MismatchReason::kNoManifest: return "no_manifest";
    case MismatchReason::kWrongPage: return "wrong_page";
  }
  return "unknown";
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

void TagTracker::InjectCopyManifestEntry(RequestId from, uint32_t from_logical, RequestId to,
                                         uint32_t to_logical) {
  auto src = manifests_.find(from);
  auto dst = manifests_.find(to);
  if (src == manifests_.end() || dst == manifests_.end() || from_logical >= src->second.size() ||
      to_logical >= dst->second.size()) {
    return;
  }
  dst->second[to_logical] = src->second[from_logical];
}

void TagTracker::VerifyBatch(std::span<const RequestPages> batch, VerifyResult* result) {
  result->failed.clear();
  result->incidents.clear();
  ++counters_.batches_verified;
  for (const RequestPages& item : batch) {
    const RequestId request = item.request;
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
    const std::vector<Entry>& manifest = it->second;
    const PageId* pages = item.pages.data();
    const Entry* entries = manifest.data();
    const size_t n = std::min(item.pages.size(), manifest.size());
    counters_.pages_checked += item.pages.size();
    // The gather-and-compare: for each page the step reads, gather its generation and transfer
    // tag, recompute the tag, and OR the differences from the manifest entry, branch-free. The
    // slow path (Explain) only runs for a request that fails.
    uint64_t bad = item.pages.size() > manifest.size() ? 1 : 0;
    for (size_t i = 0; i < n; ++i) {
      const Entry& e = entries[i];
      const PageId p = pages[i];
      const PageId q = p < num_pages_ ? p : 0;  // a bogus id never indexes the table (and fails below)
      const uint64_t gen = generation_[q];
      const uint32_t landed = transfer_tag_[q].load(std::memory_order_acquire);
      bad |= static_cast<uint64_t>(p ^ e.page) | (gen ^ e.generation) |
             (PageTag(request, static_cast<uint32_t>(i), p, gen) ^ e.tag) |
             static_cast<uint64_t>(landed ^ e.transfer_tag);
    }
    if (bad != 0) Explain(request, item.pages, manifest, result);
  }
  counters_.requests_failed += result->failed.size();
}

void TagTracker::Explain(RequestId request, std::span<const PageId> pages, const std::vector<Entry>& manifest,
                         VerifyResult* result) {
  bool reported = false;
  for (size_t i = 0; i < pages.size(); ++i) {
    const PageId p = pages[i];
    const bool known = p < num_pages_;
    IntegrityIncident incident{
        .request = request,
        .logical_page = static_cast<uint32_t>(i),
        .physical_page = p,
        .expected_page = kInvalidPage,
        .reason = MismatchReason::kWrongPage,
        .expected_generation = 0,
        .found_generation = known ? generation_[p] : 0,
        .expected_transfer_tag = 0,
        .found_transfer_tag = known ? transfer_tag_[p].load(std::memory_order_acquire) : 0,
    };
    if (i < manifest.size()) {
      const Entry& e = manifest[i];
      incident.expected_page = e.page;
      incident.expected_generation = e.generation;
      incident.expected_transfer_tag = e.transfer_tag;
      if (p != e.page) {
        incident.reason = MismatchReason::kWrongPage;
      } else if (incident.found_generation != e.generation) {
        incident.reason = MismatchReason::kGeneration;
      } else if (PageTag(request, incident.logical_page, p, e.generation) != e.tag) {
        incident.reason = MismatchReason::kTag;
      } else if (incident.found_transfer_tag != e.transfer_tag) {
        incident.reason = MismatchReason::kTransferTag;
      } else {
        continue;
      }
    }
    ++counters_.mismatches[static_cast<size_t>(incident.reason)];
    if (!reported) {
      result->failed.push_back(request);
      result->incidents.push_back(incident);
      reported = true;
    }
  }
}

void TagTracker::BuildPageChecks(std::span<const RequestPages> batch, PageChecks* out) const {
  out->checks.clear();
  out->item_failed.assign(batch.size(), 0);
  for (size_t b = 0; b < batch.size(); ++b) {
    const RequestPages& item = batch[b];
    auto it = manifests_.find(item.request);
    if (it == manifests_.end()) {
      out->item_failed[b] = 1;
      continue;
    }
    const std::vector<Entry>& manifest = it->second;
    if (item.pages.size() > manifest.size()) out->item_failed[b] = 1;
    const size_t n = std::min(item.pages.size(), manifest.size());
    for (size_t i = 0; i < n; ++i) {
      const Entry& e = manifest[i];
      PageCheck c;
      c.request = item.request;
      c.expected_generation = e.generation;
      c.expected_tag = e.tag;
      c.page = item.pages[i];
      c.expected_page = e.page;
      c.logical = static_cast<uint32_t>(i);
      c.expected_transfer_tag = e.transfer_tag;
      c.item = static_cast<uint32_t>(b);
      out->checks.push_back(c);
    }
  }
}

void TagTracker::CopyTables(std::vector<uint64_t>* generation, std::vector<uint32_t>* transfer_tag) const {
  *generation = generation_;
  transfer_tag->resize(num_pages_);
  for (size_t i = 0; i < num_pages_; ++i)
    (*transfer_tag)[i] = transfer_tag_[i].load(std::memory_order_acquire);
}

}  // namespace tandem::engine::kv
