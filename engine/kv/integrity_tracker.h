#pragma once
// KV page integrity: the tracker interface and its two implementations.
//
//   NoopTracker: integrity off. No tables, every hook returns at once, VerifyBatch checks nothing.
//   TagTracker:  a sidecar table apart from the KV data, per physical page
//                  generation     (uint64, bumped on every allocation and every free)
//                  transfer tag   (uint32, the last tag a transfer sender stamped after the data)
//                and per request a manifest: for each logical page, the physical page, the
//                generation it expects, the tag hash(request, logical page, physical page,
//                generation), and the transfer tag it expects (0: written locally).
//
// VerifyBatch runs before each forward step as one gather-and-compare pass over the page lists the
// kernels will read (no per-page virtual calls): each listed page must be the manifest's page for
// that logical position, at the generation, tag and transfer tag the request was issued for it. A
// request whose list names a page its manifest does not (a block-table bug), whose page moved to
// another owner, was freed, or received a stranger's (late) transfer write fails with a structured
// incident and the caller aborts only that request. See docs/kv-cache.md.
//
// Thread safety: the step thread calls everything except StampTransferTag, which transfer threads
// may call concurrently (the stamp is an atomic store, as a transfer's tag write is on a device).

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/kv/kv_types.h"
#include "engine/kv/page_checks.h"  // PageTag

namespace tandem::engine::kv {

enum class MismatchReason : uint8_t {
  kGeneration = 0,   // the page was reallocated or freed since the manifest entry was made
  kTag = 1,          // generation matches but the tag does not: the entry is not this request's
  kTransferTag = 2,  // a transfer write the request did not expect landed (late write after abort)
  kNoManifest = 3,   // the batch names a request the tracker has no manifest for
  kWrongPage = 4,    // the step's page list names another page than the manifest has at that
                     // logical position (or one outside the pool), or more pages than the
                     // manifest holds: a block-table bug
};
constexpr size_t kNumMismatchReasons = 5;
const char* MismatchReasonName(MismatchReason reason);

// The first failing page of a failing request.
struct IntegrityIncident {
  RequestId request = 0;
  uint32_t logical_page = 0;
  PageId physical_page = kInvalidPage;  // the page the step's list names
  PageId expected_page = kInvalidPage;  // the manifest's page there (kInvalidPage: none)
  MismatchReason reason = MismatchReason::kGeneration;
  uint64_t expected_generation = 0;
  uint64_t found_generation = 0;
  uint32_t expected_transfer_tag = 0;
  uint32_t found_transfer_tag = 0;
};

// One request's part of a step: the physical pages, in logical order, that the kernels will read
// and write this step (the request's live list, e.g. Sequence::kv.pages up to the pages covering
// kv.num_tokens + the chunk's tokens; not a copy, so a block-table bug is caught). The span must
// stay valid for the VerifyBatch call.
struct RequestPages {
  RequestId request = 0;
  std::span<const PageId> pages;
};

struct VerifyResult {
  std::vector<RequestId> failed;             // in batch order, each once
  std::vector<IntegrityIncident> incidents;  // incidents[i] explains failed[i]
  bool ok() const { return failed.empty(); }
};

// Monotonic counters (exported as tandem_kv_integrity_pages_checked_total and
// tandem_kv_integrity_aborts_total{reason} by the agent).
struct IntegrityCounters {
  uint64_t batches_verified = 0;
  uint64_t pages_checked = 0;
  uint64_t requests_failed = 0;
  std::array<uint64_t, kNumMismatchReasons> mismatches{};  // failing pages, by reason
};

class IntegrityTracker {
 public:
  virtual ~IntegrityTracker() = default;
  virtual bool enabled() const = 0;

  // Allocator hooks: bump the generation of each page (and clear its transfer tag).
  virtual void OnPagesAllocated(std::span<const PageId> pages) = 0;
  virtual void OnPagesFreed(std::span<const PageId> pages) = 0;

  // Records logical pages [first_logical, first_logical + pages.size()) of `request` with each
  // page's current generation: appends a tail page or refreshes existing entries.
  // REQUIRES: first_logical <= the request's current manifest size.
  virtual void MapPages(RequestId request, uint32_t first_logical, std::span<const PageId> pages) = 0;
  // The transfer tag the request's logical page will carry (0 = none). REQUIRES: page mapped.
  virtual void ExpectTransferTag(RequestId request, uint32_t logical_page, uint32_t tag) = 0;
  // The sender's stamp after writing a page's data. Any thread.
  virtual void StampTransferTag(PageId page, uint32_t tag) = 0;
  virtual void DropRequest(RequestId request) = 0;

  // Checks every listed page of every request in `batch` against the request's manifest entry
  // at the same logical position: the same physical page, and the page's current generation, tag
  // and transfer tag equal to those the entry expects. A list longer than the manifest fails
  // (kWrongPage); a shorter one checks only its pages. Fills `result` (cleared first).
  virtual void VerifyBatch(std::span<const RequestPages> batch, VerifyResult* result) = 0;
  virtual IntegrityCounters counters() const = 0;

  // Fault injection (tests): bump a page's generation without a reallocation.
  virtual void InjectBumpGeneration(PageId page) = 0;
};

class NoopTracker final : public IntegrityTracker {
 public:
  bool enabled() const override { return false; }
  void OnPagesAllocated(std::span<const PageId>) override {}
  void OnPagesFreed(std::span<const PageId>) override {}
  void MapPages(RequestId, uint32_t, std::span<const PageId>) override {}
  void ExpectTransferTag(RequestId, uint32_t, uint32_t) override {}
  void StampTransferTag(PageId, uint32_t) override {}
  void DropRequest(RequestId) override {}
  void VerifyBatch(std::span<const RequestPages>, VerifyResult* result) override {
    result->failed.clear();
    result->incidents.clear();
  }
  IntegrityCounters counters() const override { return {}; }
  void InjectBumpGeneration(PageId) override {}
};

class TagTracker final : public IntegrityTracker {
 public:
  explicit TagTracker(size_t num_pages);

  bool enabled() const override { return true; }
  void OnPagesAllocated(std::span<const PageId> pages) override;
  void OnPagesFreed(std::span<const PageId> pages) override;
  void MapPages(RequestId request, uint32_t first_logical, std::span<const PageId> pages) override;
  void ExpectTransferTag(RequestId request, uint32_t logical_page, uint32_t tag) override;
  void StampTransferTag(PageId page, uint32_t tag) override;
  void DropRequest(RequestId request) override;
  void VerifyBatch(std::span<const RequestPages> batch, VerifyResult* result) override;
  IntegrityCounters counters() const override { return counters_; }
  void InjectBumpGeneration(PageId page) override;
  // Fault injection (tests): copies request `from`'s manifest entry at `from_logical` (page,
  // generation, tag, transfer tag) over `to`'s entry at `to_logical`, as a manifest bug would.
  // Nothing happens unless both entries exist.
  void InjectCopyManifestEntry(RequestId from, uint32_t from_logical, RequestId to, uint32_t to_logical);

  uint64_t generation(PageId page) const { return generation_[page]; }

  // The batch as flat checks (page_checks.h) for a batched check on a device: one PageCheck per
  // listed page that has a manifest entry, item_failed set where the host fails the request
  // already (kNoManifest, or a list longer than its manifest). The same requests fail as in
  // VerifyBatch when CheckPages runs over the tables CopyTables gives; VerifyBatch (with its
  // counters and incidents) stays the path of record.
  void BuildPageChecks(std::span<const RequestPages> batch, PageChecks* out) const;
  // The page tables as a device copy holds them: generation [num_pages], transfer tag [num_pages].
  void CopyTables(std::vector<uint64_t>* generation, std::vector<uint32_t>* transfer_tag) const;
  size_t manifest_pages(RequestId request) const;

 private:
  struct Entry {  // 24 bytes
    PageId page;
    uint32_t transfer_tag;
    uint64_t generation;
    uint64_t tag;
  };
  // The slow path for a request that failed: its first failing page's incident, per-reason counts.
  void Explain(RequestId request, std::span<const PageId> pages, const std::vector<Entry>& manifest,
               VerifyResult* result);
  std::vector<uint64_t> generation_;                       // [num_pages]
  std::unique_ptr<std::atomic<uint32_t>[]> transfer_tag_;  // [num_pages]
  size_t num_pages_;
  std::unordered_map<RequestId, std::vector<Entry>> manifests_;
  IntegrityCounters counters_;
};

}  // namespace tandem::engine::kv
