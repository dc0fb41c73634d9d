// Scheduler unit tests: admission, chunked prefill, the batch limits, preemption by recompute,
// cancellation in each phase, deferred release and rejection. The "engine" here is Apply(), which
// does what Engine::Step does with a plan minus the model: KV grows by each chunk and a sampling
// chunk appends a token.

#include "engine/runtime/scheduler.h"

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "common/clock.h"

namespace tandem::engine::runtime {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  void Make(size_t pages, size_t page_tokens, int64_t max_batch_tokens = 1024, int64_t max_running = 64,
            bool prefix_cache = false) {
    sched_.reset();
    cache_.reset();
    allocator_ = std::make_unique<kv::PageAllocator>(pages, &tracker_);
    ledger_ = std::make_unique<kv::TransferLedger>(&clock_);
    if (prefix_cache) cache_ = std::make_unique<kv::PrefixCache>(allocator_.get(), page_tokens);
    sched_ = std::make_unique<Scheduler>(SchedulerConfig{max_batch_tokens, max_running}, page_tokens,
                                         allocator_.get(), &tracker_, ledger_.get(), cache_.get());
  }
  void Add(RequestId id, size_t prompt_len) { AddTokens(id, std::vector<int32_t>(prompt_len, 5)); }
  void AddTokens(RequestId id, std::vector<int32_t> prompt, const std::string& tenant = "") {
    Request r;
    r.id = id;
    r.prompt = std::move(prompt);
    r.tenant = tenant;
    ASSERT_TRUE(sched_->Add(r).ok());
  }
  StepPlan Step() {
    StepPlan plan = sched_->Schedule();
    for (const ScheduledChunk& c : plan.chunks) {
      c.seq->kv.num_tokens += c.num_tokens;
      if (c.samples) c.seq->tokens.push_back(7);
    }
    for (RequestId id : plan.out_of_pages) EXPECT_TRUE(sched_->Remove(id).ok());
    CheckPages();
    return plan;
  }
  // Every page reference belongs to a live request's block table, the prefix cache or the ledger.
  void CheckPages() {
    size_t refs = 0;
    for (kv::PageId p = 0; p < allocator_->num_pages(); ++p) refs += allocator_->refcount(p);
    EXPECT_EQ(refs, sched_->pages_held_by_requests() + ledger_->parked_pages() +
                        (cache_ != nullptr ? cache_->cached_pages() : 0));
  }
  static std::vector<std::pair<RequestId, int64_t>> Chunks(const StepPlan& plan) {
    std::vector<std::pair<RequestId, int64_t>> out;
    for (const ScheduledChunk& c : plan.chunks) out.emplace_back(c.seq->id, c.num_tokens);
    return out;
  }
  using Chunk = std::pair<RequestId, int64_t>;

  kv::NoopTracker tracker_;
  FakeClock clock_;
  std::unique_ptr<kv::PageAllocator> allocator_;
  std::unique_ptr<kv::TransferLedger> ledger_;
  std::unique_ptr<kv::PrefixCache> cache_;
  std::unique_ptr<Scheduler> sched_;
};

TEST_F(SchedulerTest, ConfigValidation) {
  EXPECT_EQ(ValidateSchedulerConfig({0, 4}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateSchedulerConfig({4, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateSchedulerConfig({1, 1}).ok());
}

TEST_F(SchedulerTest, AdmitsByFreePagesInArrivalOrder) {
  Make(/*pages=*/8, /*page_tokens=*/4);
  Add(1, 10);  // 3 pages
  Add(2, 19);  // 5 pages: the pool is full
  Add(3, 4);   // 1 page: waits
  StepPlan plan = Step();
  EXPECT_EQ(Chunks(plan), (std::vector<Chunk>{{1, 10}, {2, 19}}));
  EXPECT_TRUE(plan.chunks[0].samples && plan.chunks[1].samples);
  EXPECT_EQ(sched_->num_running(), 2u);
  EXPECT_EQ(sched_->num_waiting(), 1u);
  EXPECT_EQ(allocator_->free_pages(), 0u);
  // Decode continues within the reserved pages; request 3 still does not fit.
  plan = Step();
  EXPECT_EQ(Chunks(plan), (std::vector<Chunk>{{1, 1}, {2, 1}}));
  // Request 1 finishes: its 3 pages come back and request 3 is admitted.
  ASSERT_TRUE(sched_->Remove(1).ok());
  plan = Step();
  EXPECT_EQ(Chunks(plan), (std::vector<Chunk>{{2, 1}, {3, 4}}));
}

TEST_F(SchedulerTest, HeadOfQueueIsNotOvertaken) {
  Make(8, 4);
  Add(1, 24);  // 6 pages
  Add(2, 12);  // 3 pages: does not fit beside 1
  Add(3, 4);   // 1 page: would fit, but 2 is first
  EXPECT_EQ(Chunks(Step()), (std::vector<Chunk>{{1, 24}}));
  EXPECT_EQ(sched_->num_waiting(), 2u);
  EXPECT_EQ(Chunks(Step()), (std::vector<Chunk>{{1, 1}}));
}

TEST_F(SchedulerTest, ChunkedPrefillWithinTheTokenBudget) {
  Make(64, 4, /*max_batch_tokens=*/8);
  Add(1, 20);
  EXPECT_EQ(sched_->prefill_tokens_pending(), 20u);  // queued: the whole prompt
  StepPlan plan = Step();
  EXPECT_EQ(Chunks(plan), (std::vector<Chunk>{{1, 8}}));
  EXPECT_FALSE(plan.chunks[0].samples);
  EXPECT_EQ(allocator_->held_pages(), 5u);           // the whole prompt is reserved at admission
  EXPECT_EQ(sched_->prefill_tokens_pending(), 12u);  // running: what its chunks have not computed
  Add(2, 3);
  EXPECT_EQ(sched_->prefill_tokens_pending(), 15u);
  // Request 1's next chunk (8) fills the budget; 2 waits for a step with room.
  EXPECT_EQ(Chunks(Step()), (std::vector<Chunk>{{1, 8}}));
  plan = Step();
  EXPECT_EQ(Chunks(plan), (std::vector<Chunk>{{1, 4}, {2, 3}}));
  EXPECT_TRUE(plan.chunks[0].samples && plan.chunks[1].samples);
  EXPECT_EQ(sched_->prefill_tokens_pending(), 0u);  // decoding requests owe no prefill
  // Both decode now: decode tokens come first, in admission order.
  Add(3, 30);
  EXPECT_EQ(Chunks(Step()), (std::vector<Chunk>{{1, 1}, {2, 1}, {3, 6}}));
  EXPECT_EQ(Chunks(Step()), (std::vector<Chunk>{{1, 1}, {2, 1}, {3, 6}}));
}

TEST_F(SchedulerTest, MaxRunningRequests) {
  Make(64, 4, 1024, /*max_running=*/2);
  Add(1, 3);
  Add(2, 3);
  Add(3, 3);
  EXPECT_EQ(Chunks(Step()), (std::vector<Chunk>{{1, 3}, {2, 3}}));
  EXPECT_EQ(sched_->num_waiting(), 1u);
  ASSERT_TRUE(sched_->Remove(2).ok());
  EXPECT_EQ(Chunks(Step()), (std::vector<Chunk>{{1, 1}, {3, 3}}));
}

TEST_F(SchedulerTest, PreemptsTheLatestAdmittedAndRecomputes) {
  Make(/*pages=*/4, /*page_tokens=*/4);
  Add(1, 7);  // 2 pages
  Add(2, 7);  // 2 pages
  Add(3, 2);  // waits
  Step();     // both prefill and sample: 8 tokens each, 7 computed
  Step();     // token 8 fits in the second page: 9 tokens, 8 computed
  Sequence* two = sched_->Find(2);
  const std::vector<int32_t> two_tokens = two->tokens;
  // Request 1 needs a third page: request 2 (admitted last) gives its pages back.
  StepPlan plan = Step();
  EXPECT_EQ(plan.preempted, (std::vector<RequestId>{2}));
  EXPECT_EQ(Chunks(plan), (std::vector<Chunk>{{1, 1}}));
  EXPECT_EQ(two->phase, SeqPhase::kWaiting);
  EXPECT_EQ(two->kv.num_tokens, 0);
  EXPECT_EQ(two->table.num_pages(), 0u);
  EXPECT_EQ(two->tokens, two_tokens);  // prompt + generated tokens kept for the recompute
  EXPECT_EQ(two->preemptions, 1);
  EXPECT_EQ(sched_->counters().preemptions, 1u);
  // It is back at the front of the queue (ahead of 3): 9 tokens need 3 pages, 1 is free.
  EXPECT_EQ(Chunks(Step()), (std::vector<Chunk>{{1, 1}}));
  ASSERT_TRUE(sched_->Remove(1).ok());
  plan = Step();
  ASSERT_EQ(Chunks(plan), (std::vector<Chunk>{{2, 9}, {3, 2}}));
  EXPECT_TRUE(plan.chunks[0].samples);  // the recompute ends by sampling token 10, not 9 again
  EXPECT_EQ(two->tokens.size(), 10u);
}

TEST_F(SchedulerTest, ARequestThatPreemptsItselfWaits) {
  Make(3, 4);
  Add(1, 5);  // 2 pages, room up to token 8
  Add(2, 4);  // 1 page, full
  Step();
  // 2 (admitted last) needs a second page: it is itself the request to preempt; 1 goes on.
  StepPlan plan = Step();
  EXPECT_EQ(plan.preempted, (std::vector<RequestId>{2}));
  EXPECT_EQ(Chunks(plan), (std::vector<Chunk>{{1, 1}}));
  EXPECT_EQ(sched_->Find(2)->phase, SeqPhase::kWaiting);
  EXPECT_EQ(allocator_->held_pages(), 2u);
}

TEST_F(SchedulerTest, OutOfPagesWhenTheWholePoolIsNotEnough) {
  Make(2, 4);
  Add(1, 7);
  Step();                  // 7 computed, 8 tokens
  Step();                  // 8 computed, 9 tokens
  StepPlan plan = Step();  // token 9 needs a third page the pool does not have
  EXPECT_EQ(plan.out_of_pages, (std::vector<RequestId>{1}));
  EXPECT_TRUE(plan.chunks.empty());
  EXPECT_EQ(allocator_->free_pages(), 2u);
}

TEST_F(SchedulerTest, RejectsWhatCanNeverFit) {
  Make(2, 4);
  Request r;
  r.id = 9;
  r.prompt.assign(8, 1);  // 8 + 1 tokens need 3 pages
  const Status st = sched_->Add(r);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("never run"), std::string::npos) << st.message();
  r.prompt.assign(7, 1);
  EXPECT_TRUE(sched_->Add(r).ok());
  EXPECT_EQ(sched_->Add(r).code(), StatusCode::kAlreadyExists);
  r.id = 10;
  r.prompt.clear();
  EXPECT_EQ(sched_->Add(r).code(), StatusCode::kInvalidArgument);
}

TEST_F(SchedulerTest, CancelInEachPhaseFreesPages) {
  Make(16, 4, /*max_batch_tokens=*/4);
  Add(1, 2);   // decoding after one step
  Add(2, 10);  // prefilling (3 pages reserved, chunks of the budget)
  Add(3, 40);  // waiting (10 pages needed, 16 - 1 - 3 = 12 free, but the budget is spent)
  Step();
  Step();
  EXPECT_EQ(sched_->Find(1)->phase, SeqPhase::kRunning);
  EXPECT_EQ(sched_->Find(2)->phase, SeqPhase::kRunning);
  EXPECT_LT(sched_->Find(2)->kv.num_tokens, 10);
  // Waiting: no pages to give back.
  ASSERT_TRUE(sched_->Remove(3).ok());
  EXPECT_EQ(allocator_->held_pages(), 4u);
  ASSERT_TRUE(sched_->Remove(2).ok());  // mid-prefill
  EXPECT_EQ(allocator_->held_pages(), 1u);
  ASSERT_TRUE(sched_->Remove(1).ok());  // decoding
  EXPECT_EQ(allocator_->held_pages(), 0u);
  EXPECT_EQ(sched_->num_live(), 0u);
  EXPECT_EQ(sched_->Remove(1).status().code(), StatusCode::kNotFound);
  // Export-held (prefill-only role).
  Add(4, 5);
  Step();
  ASSERT_TRUE(sched_->HoldForExport(4).ok());
  EXPECT_EQ(sched_->num_running(), 0u);
  EXPECT_EQ(sched_->num_export_held(), 1u);
  EXPECT_TRUE(Chunks(Step()).empty());  // held requests are not scheduled
  EXPECT_EQ(allocator_->held_pages(), 2u);
  ASSERT_TRUE(sched_->Remove(4).ok());
  EXPECT_EQ(allocator_->held_pages(), 0u);
}

TEST_F(SchedulerTest, DeferredReleaseWaitsForTheTransfer) {
  Make(8, 4);
  Add(1, 6);
  Add(2, 6);
  Step();
  ASSERT_TRUE(ledger_->Begin(/*transfer_id=*/77, 1, /*timeout_ms=*/1000).ok());
  ASSERT_TRUE(ledger_->Begin(78, 2, 1000).ok());
  ASSERT_TRUE(sched_->Remove(1).ok());  // cancelled mid-transfer: its pages stay parked
  ASSERT_TRUE(sched_->Remove(2).ok());
  EXPECT_EQ(allocator_->held_pages(), 4u);
  EXPECT_EQ(ledger_->parked_pages(), 4u);
  CheckPages();
  EXPECT_EQ(sched_->ReclaimDeferred(), 0u);
  ASSERT_TRUE(ledger_->Finish(77, kv::TransferState::kFailed).ok());
  EXPECT_EQ(sched_->ReclaimDeferred(), 2u);
  EXPECT_EQ(allocator_->held_pages(), 2u);
  clock_.AdvanceMillis(1000);  // transfer 78 times out
  EXPECT_EQ(sched_->ReclaimDeferred(), 2u);
  EXPECT_EQ(allocator_->held_pages(), 0u);
  EXPECT_EQ(ledger_->Finish(78, kv::TransferState::kDone).code(), StatusCode::kFailedPrecondition);
}

TEST_F(SchedulerTest, AddRunningTakesImportedPages) {
  Make(4, 4, 1024, /*max_running=*/1);
  auto seq = std::make_unique<Sequence>(5, 4, allocator_.get(), &tracker_);
  seq->tokens = {1, 2, 3, 4, 5, 9};
  seq->prompt_len = 5;
  ASSERT_TRUE(seq->table.AppendTokens(5).ok());
  for (const kv::PageRef& ref : seq->table.pages()) seq->kv.pages.push_back(ref.page);
  seq->kv.num_tokens = 5;
  ASSERT_TRUE(sched_->AddRunning(std::move(seq)).ok());
  EXPECT_EQ(Chunks(Step()), (std::vector<Chunk>{{5, 1}}));  // decodes the first token
  auto other = std::make_unique<Sequence>(6, 4, allocator_.get(), &tracker_);
  ASSERT_TRUE(other->table.AppendTokens(3).ok());
  EXPECT_EQ(sched_->AddRunning(std::move(other)).code(), StatusCode::kResourceExhausted);
  CheckPages();  // the refused sequence's page went back
}

TEST_F(SchedulerTest, PrefixCacheSharesWholePromptPagesWithinATenant) {
  Make(/*pages=*/16, /*page_tokens=*/4, 1024, 64, /*prefix_cache=*/true);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  AddTokens(1, prompt, "tenant-a");
  Step();  // prefill; the next Schedule publishes pages [1..4] and [5..8]
  std::vector<int32_t> longer = prompt;
  longer.insert(longer.end(), {11, 12});
  AddTokens(2, longer, "tenant-a");
  AddTokens(3, prompt, "tenant-b");  // another tenant: never shares
  StepPlan plan = Step();
  ASSERT_EQ(Chunks(plan), (std::vector<Chunk>{{1, 1}, {2, 4}, {3, 10}}));
  const Sequence& one = *sched_->Find(1);
  const Sequence& two = *sched_->Find(2);
  const Sequence& three = *sched_->Find(3);
  EXPECT_EQ(two.cached_prompt_tokens, 8u);
  EXPECT_EQ(three.cached_prompt_tokens, 0u);
  EXPECT_EQ(two.kv.pages[0], one.kv.pages[0]);
  EXPECT_EQ(two.kv.pages[1], one.kv.pages[1]);
  EXPECT_NE(two.kv.pages[2], one.kv.pages[2]);
  for (size_t p = 0; p < 3; ++p) EXPECT_NE(three.kv.pages[p], one.kv.pages[p]);
  EXPECT_EQ(allocator_->refcount(one.kv.pages[0]), 3u);  // request 1, request 2, the cache
  EXPECT_EQ(cache_->counters().hits, 1u);
  // A prompt of whole cached pages still computes its last token (for the logits).
  AddTokens(4, {1, 2, 3, 4, 5, 6, 7, 8}, "tenant-a");
  plan = Step();
  EXPECT_EQ(sched_->Find(4)->cached_prompt_tokens, 4u);
  EXPECT_EQ(plan.chunks.back().num_tokens, 4);
  // The requests go; the cache keeps its pages (evictable now) and gives them up for admission.
  for (RequestId id : {1, 2, 3, 4}) ASSERT_TRUE(sched_->Remove(id).ok());
  CheckPages();
  EXPECT_EQ(allocator_->held_pages(), cache_->cached_pages());
  EXPECT_GT(cache_->evictable_pages(), 0u);
  AddTokens(5, std::vector<int32_t>(60, 9), "tenant-c");  // 15 pages: evicts cached ones
  EXPECT_EQ(Chunks(Step()), (std::vector<Chunk>{{5, 60}}));
  CheckPages();
}

TEST_F(SchedulerTest, RequestsWithoutATenantNeverSharePrefixPages) {
  Make(/*pages=*/32, /*page_tokens=*/4, 1024, 64, /*prefix_cache=*/true);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  AddTokens(1, prompt);  // no tenant
  Step();
  AddTokens(2, prompt);  // no tenant, same prompt: no hit, and request 1 published nothing
  AddTokens(3, prompt, "a");
  Step();
  EXPECT_EQ(sched_->Find(2)->cached_prompt_tokens, 0u);
  EXPECT_EQ(cache_->counters().hits, 0u);
  EXPECT_EQ(cache_->counters().queries, 1u);  // request 3's; tenant-less requests do not look up
  for (size_t p = 0; p < 3; ++p) EXPECT_NE(sched_->Find(2)->kv.pages[p], sched_->Find(1)->kv.pages[p]);
  AddTokens(4, prompt, "a");  // tenant "a" still shares
  Step();
  EXPECT_EQ(sched_->Find(4)->cached_prompt_tokens, 8u);
  EXPECT_EQ(sched_->Find(4)->kv.pages[0], sched_->Find(3)->kv.pages[0]);
  EXPECT_EQ(cache_->counters().hits, 1u);
  EXPECT_EQ(cache_->cached_pages(), 2u);  // only tenant "a"'s two whole prompt pages
  CheckPages();
}

}  // namespace
}  // namespace tandem::engine::runtime
