// The injection test of issue 4: every injected fault of every kind is detected by VerifyBatch
// before any read, only the victim request is aborted, the pool returns to its baseline, and no
// request ever reads a byte of another request's KV. With tags off the same run shows the
// corruption happening, so the test can see what it claims to prevent.

#include <map>
#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "common/clock.h"
#include "engine/formats/float_codecs.h"
#include "engine/kv/integrity_tracker.h"
#include "engine/kv/page_allocator.h"
#include "engine/kv/page_pool.h"
#include "engine/kv/transfer_ledger.h"
#include "engine/kv/transfer_tags.h"

namespace tandem::engine::kv {
namespace {

constexpr size_t kLayers = 2, kPageTokens = 4, kPages = 64, kRequestPages = 3, kTrials = 100;

enum class Fault { kFreeWhileMapped, kHandToAnother, kBumpGeneration, kLateWriteAfterAbort };
const Fault kAllFaults[] = {Fault::kFreeWhileMapped, Fault::kHandToAnother, Fault::kBumpGeneration,
                            Fault::kLateWriteAfterAbort};

// One row of request r's KV: its id in the first two values, then a pattern of (r, token, layer).
std::vector<uint16_t> Row(RequestId r, size_t token, size_t layer) {
  std::vector<uint16_t> row(576);
  row[0] = FloatToBf16(static_cast<float>(r % 256));
  row[1] = FloatToBf16(static_cast<float>(r / 256));
  for (size_t i = 2; i < row.size(); ++i) {
    row[i] = FloatToBf16(static_cast<float>((r * 7 + token * 5 + layer + i * 13) % 251));
  }
  return row;
}

struct Request {
  std::vector<PageRef> pages;
};

// A miniature decode worker: pool + allocator + tracker + ledger, driven by the test.
class Harness {
 public:
  explicit Harness(bool tags) : clock_(0), ledger_(&clock_) {
    PagePoolConfig c;
    c.shape.num_layers = kLayers;
    c.page_tokens = kPageTokens;
    c.budget_bytes = kPages * kLayers * kPageTokens * 1152;
    pool_ = std::move(PagePool::Create(c).value());
    if (tags) {
      tracker_ = std::make_unique<TagTracker>(kPages);
    } else {
      tracker_ = std::make_unique<NoopTracker>();
    }
    alloc_ = std::make_unique<PageAllocator>(kPages, tracker_.get());
  }

  void Start(RequestId r) {
    Request& req = requests_[r];
    ASSERT_TRUE(alloc_->Allocate(kRequestPages, &req.pages).ok());
    std::vector<PageId> ids;
    for (const PageRef& p : req.pages) ids.push_back(p.page);
    tracker_->MapPages(r, 0, ids);
    for (size_t k = 0; k < kRequestPages; ++k) WritePage(r, req.pages[k].page, k);
  }

  void WritePage(RequestId owner, PageId page, size_t logical) {
    for (size_t t = 0; t < kPageTokens; ++t) {
      for (size_t l = 0; l < kLayers; ++l) {
        ASSERT_TRUE(pool_->WriteRows(page, l, t, Row(owner, logical * kPageTokens + t, l)).ok());
      }
    }
  }

  // Rows of r's KV that are not r's own (0 when nothing leaked into its pages).
  size_t ForeignRows(RequestId r) const {
    size_t bad = 0;
    std::vector<uint16_t> row(576);
    const Request& req = requests_.at(r);
    for (size_t k = 0; k < req.pages.size(); ++k) {
      for (size_t t = 0; t < kPageTokens; ++t) {
        for (size_t l = 0; l < kLayers; ++l) {
          EXPECT_TRUE(pool_->ReadRows(req.pages[k].page, l, t, row).ok());
          bad += row != Row(r, k * kPageTokens + t, l);
        }
      }
    }
    return bad;
  }

  // The per-step check: verify the batch, abort the failures, then every survivor reads its KV.
  // Returns the aborted requests; adds the rows read that were not the reader's to *foreign_rows.
  std::vector<RequestId> Step(size_t* foreign_rows) {
    std::vector<std::vector<PageId>> lists;  // the pages each request's step reads
    std::vector<RequestPages> batch;
    lists.reserve(requests_.size());
    for (const auto& [id, req] : requests_) {
      std::vector<PageId>& list = lists.emplace_back();
      for (const PageRef& p : req.pages) list.push_back(p.page);
      batch.push_back({id, list});
    }
    VerifyResult result;
    tracker_->VerifyBatch(batch, &result);
    for (RequestId r : result.failed) Finish(r);
    for (const auto& [id, req] : requests_) *foreign_rows += ForeignRows(id);
    return result.failed;
  }

  // Ends a request: its pages go back (or wait in the ledger while a transfer is in flight).
  // Stale refs (pages a fault took away) are refused by the allocator and skipped.
  void Finish(RequestId r) {
    auto it = requests_.find(r);
    tracker_->DropRequest(r);
    if (!ledger_.DeferRelease(r, it->second.pages)) {
      for (const PageRef& p : it->second.pages) (void)alloc_->Unref(p);
    }
    requests_.erase(it);
  }

  void FinishAll() {
    while (!requests_.empty()) Finish(requests_.begin()->first);
    for (const PageRef& p : ledger_.TakeReleasable()) (void)alloc_->Unref(p);
  }

  FakeClock clock_;
  TransferLedger ledger_;
  TransferTagIssuer issuer_;
  std::unique_ptr<PagePool> pool_;
  std::unique_ptr<IntegrityTracker> tracker_;
  std::unique_ptr<PageAllocator> alloc_;
  std::map<RequestId, Request> requests_;
};

struct TrialOutcome {
  RequestId victim = 0;
  std::vector<RequestId> aborted;
  size_t foreign_rows = 0;
};

// Four running requests, one fault, one decode step. Request ids are unique per trial.
TrialOutcome RunTrial(Harness& h, Fault fault, uint32_t seed) {
  std::mt19937 rng(seed);
  const RequestId base = 1000 + seed * 10;
  for (RequestId r = base; r < base + 4; ++r) h.Start(r);
  const RequestId target = base + rng() % 4;
  const size_t k = rng() % kRequestPages;
  const PageId page = h.requests_[target].pages[k].page;
  TrialOutcome out;
  switch (fault) {
    case Fault::kFreeWhileMapped:
      h.alloc_->InjectFreeWhileMapped(page);
      h.Start(base + 5);  // reuses the freed page (LIFO) and writes over it
      out.victim = target;
      break;
    case Fault::kHandToAnother:
      h.alloc_->InjectHandOutNext(page);
      h.Start(base + 5);
      out.victim = target;
      break;
    case Fault::kBumpGeneration:
      h.tracker_->InjectBumpGeneration(page);
      out.victim = target;
      break;
    case Fault::kLateWriteAfterAbort: {
      // `target` is receiving a transfer: one tag per page, expected by its manifest.
      const uint64_t transfer = base;
      EXPECT_TRUE(h.ledger_.Begin(transfer, target, 1000).ok());
      std::vector<uint32_t> tags;
      for (size_t i = 0; i < kRequestPages; ++i) {
        tags.push_back(h.issuer_.Next());
        h.tracker_->ExpectTransferTag(target, static_cast<uint32_t>(i), tags.back());
        h.tracker_->StampTransferTag(h.requests_[target].pages[i].page, tags.back());
      }
      // Aborted mid-transfer, and (the fault) its pages are freed before the transfer ends.
      h.ledger_.InjectReleaseBeforeTerminal(true);
      h.Finish(target);
      h.ledger_.InjectReleaseBeforeTerminal(false);
      h.Start(base + 5);  // takes the freed pages
      // The aborted transfer's last page lands late: data, then its tag.
      h.WritePage(target, page, k);
      h.tracker_->StampTransferTag(page, tags[k]);
      EXPECT_TRUE(h.ledger_.Finish(transfer, TransferState::kFailed).ok());
      out.victim = base + 5;
      break;
    }
  }
  out.aborted = h.Step(&out.foreign_rows);
  h.FinishAll();
  return out;
}

TEST(KvInjectionTest, TagsDetectEveryFaultAndAbortOnlyTheVictim) {
  for (Fault fault : kAllFaults) {
    Harness h(/*tags=*/true);
    size_t detected = 0;
    for (uint32_t trial = 0; trial < kTrials; ++trial) {
      TrialOutcome out = RunTrial(h, fault, trial);
      ASSERT_EQ(out.aborted, std::vector<RequestId>{out.victim})
          << "fault " << static_cast<int>(fault) << " trial " << trial;
      ASSERT_EQ(out.foreign_rows, 0u) << "a request read another request's KV";
      ASSERT_EQ(h.alloc_->free_pages(), kPages) << "pool not back to baseline";
      detected += out.aborted.size();
    }
    EXPECT_EQ(detected, kTrials);
    const IntegrityCounters c = h.tracker_->counters();
    EXPECT_EQ(c.requests_failed, kTrials);
    std::printf("fault %d: %zu/%zu detected, pages checked %llu\n", static_cast<int>(fault), detected,
                kTrials, static_cast<unsigned long long>(c.pages_checked));
  }
}

TEST(KvInjectionTest, WithoutTagsTheCorruptionIsRead) {
  // The bump-generation fault corrupts only the tag table, which does not exist with tags off;
  // the three faults that move data are read back as another request's KV.
  for (Fault fault : {Fault::kFreeWhileMapped, Fault::kHandToAnother, Fault::kLateWriteAfterAbort}) {
    Harness h(/*tags=*/false);
    size_t corrupted_trials = 0;
    for (uint32_t trial = 0; trial < kTrials; ++trial) {
      TrialOutcome out = RunTrial(h, fault, trial);
      EXPECT_TRUE(out.aborted.empty());
      corrupted_trials += out.foreign_rows > 0;
    }
    EXPECT_EQ(corrupted_trials, kTrials) << "fault " << static_cast<int>(fault);
  }
}

TEST(KvInjectionTest, DeferredReleaseMakesALateWriteHarmless) {
  Harness h(/*tags=*/true);
  h.Start(1);
  h.Start(2);
  ASSERT_TRUE(h.ledger_.Begin(77, 1, 1000).ok());
  const PageId page = h.requests_[1].pages[0].page;
  h.Finish(1);  // aborted mid-transfer: its pages wait for the transfer's terminal state
  EXPECT_EQ(h.ledger_.parked_pages(), kRequestPages);
  h.Start(3);  // cannot get request 1's pages
  for (const PageRef& p : h.requests_[3].pages) ASSERT_NE(p.page, page);
  h.WritePage(1, page, 0);  // the late write lands in a parked page
  h.tracker_->StampTransferTag(page, 0x55);
  size_t foreign = 0;
  EXPECT_TRUE(h.Step(&foreign).empty());
  EXPECT_EQ(foreign, 0u);
  h.clock_.AdvanceMillis(1000);
  EXPECT_EQ(h.ledger_.ExpireOverdue(), 1u);  // the transfer times out: its one terminal state
  EXPECT_EQ(h.ledger_.Finish(77, TransferState::kDone).code(), StatusCode::kFailedPrecondition);
  h.FinishAll();
  EXPECT_EQ(h.alloc_->free_pages(), kPages);
}

}  // namespace
}  // namespace tandem::engine::kv
