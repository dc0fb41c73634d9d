#pragma once
// Continuous batching: which tokens of which requests the next forward step computes.
//
// Each step (Schedule) packs, within max_batch_tokens and max_running_requests:
//   1. one decode token per running request whose prompt is done, in admission order; a request
//      whose next token needs a page that is not free preempts the most recently admitted running
//      request (recompute: its pages are released and it goes back to the front of the waiting
//      queue with prompt + generated tokens, to be prefilled again; nothing is emitted twice);
//   2. the next prefill chunk of each running request still prefilling (chunked prefill: a long
//      prompt takes several steps);
//   3. waiting requests in FCFS order, admitted while their whole pending token run fits in the
//      free pages (pages are reserved at admission, so prefill chunks never allocate); the first
//      one that does not fit stops admission (no overtaking).
// With a PrefixCache, admission first adopts the longest cached run of whole prompt pages under the
// request's tenant salt (at least one token is always computed, for the logits), and a request
// publishes its whole prompt pages once they are computed. A request without a tenant (and an
// imported one, which has no salt) does neither: it never shares pages with anyone. Unlocked
// cached pages are evicted (LRU) before a request waits or another is preempted.
// Pages leave a request through ReleasePages, which parks them in the TransferLedger while a
// transfer into or out of them is in flight (deferred release) and Unrefs them otherwise.
//
// Pure host bookkeeping (no model): the Engine runs the plan. Thread safety: none (step thread).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "engine/kv/transfer_ledger.h"
#include "engine/runtime/request.h"

namespace tandem::engine::runtime {

struct SchedulerConfig {
  int64_t max_batch_tokens = 2048;    // tokens computed per step, decode and prefill together
  int64_t max_running_requests = 64;  // requests holding pages and computing (export-held excluded)
};

// REQUIRES-style checks on the knobs: InvalidArgument naming the bad one.
Status ValidateSchedulerConfig(const SchedulerConfig& config);

// One request's part of a step: feed tokens[kv.num_tokens, kv.num_tokens + num_tokens).
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t num_tokens = 0;
  bool samples = false;  // the chunk reaches the last known token: sample the next one
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;
  int64_t num_tokens = 0;
  std::vector<RequestId> preempted;  // this step, in order
  // Running requests that cannot grow by one token even with the whole pool (prompt + output
  // fill it): the engine finishes them with FinishReason::kLength. They are not in `chunks`.
  std::vector<RequestId> out_of_pages;
};

struct SchedulerCounters {
  uint64_t preemptions = 0;
  uint64_t stale_page_releases = 0;  // refs already taken by a fault (nothing freed for those)
};

class Scheduler {
 public:
  // allocator, tracker, ledger and cache are not owned and must outlive the scheduler; cache may
  // be nullptr (no prefix sharing). REQUIRES: ValidateSchedulerConfig(config).ok(), page_tokens > 0.
  Scheduler(const SchedulerConfig& config, size_t page_tokens, kv::PageAllocator* allocator,
            kv::IntegrityTracker* tracker, kv::TransferLedger* ledger, kv::PrefixCache* cache = nullptr);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Pages `tokens` tokens occupy.
  size_t PagesFor(size_t tokens) const { return (tokens + page_tokens_ - 1) / page_tokens_; }
  // Whether a request of `prompt_tokens` could ever run: its prompt plus one generated token fit
  // in the whole pool.
  bool CanEverFit(size_t prompt_tokens) const {
    return PagesFor(prompt_tokens + 1) <= allocator_->num_pages();
  }

  // A new request at the back of the waiting queue. AlreadyExists for a live id; InvalidArgument
  // for an empty prompt; OutOfRange when it can never fit (CanEverFit). request.tenant salts its
  // prefix-cache lookups (kv::MakeTenantSalt), so tenants never share pages; an empty tenant
  // turns prefix sharing off for the request (no lookup, no publish).
  Status Add(const Request& request);

  // Adds a request whose KV is already in pages it holds (decode-only import): `seq` has
  // tokens = prompt + first token, kv.num_tokens = prompt length, and a filled block table.
  // It joins the running set. ResourceExhausted at max_running_requests; AlreadyExists for a live
  // id (the sequence's pages are released then).
  Status AddRunning(std::unique_ptr<Sequence> seq);

  // Adds a request whose KV is about to arrive (decode-only ReserveImport): `seq` holds its pages
  // (tokens = prompt, kv.num_tokens = prompt length) and takes a running slot, but is not scheduled
  // until StartImported. ResourceExhausted when running plus importing requests reach
  // max_running_requests; AlreadyExists for a live id (its pages are released then).
  Status AddImporting(std::unique_ptr<Sequence> seq);
  // An importing request's KV has landed: it joins the running set (decode). FailedPrecondition
  // unless it is importing.
  Status StartImported(RequestId id);

  // Plans the next step (see the file comment); updates phases and page reservations.
  StepPlan Schedule();

  // Moves a running request that has sampled its first token to kExportHeld (prefill-only role).
  // Its pages stay until Remove. FailedPrecondition unless it is running.
  Status HoldForExport(RequestId id);

  // Publishes a running request's whole prompt pages to the prefix cache now (no-op if they are
  // already, if its prompt is not computed, or without a cache). For a request that finished at
  // its first token: running requests publish at the next Schedule(), which it never sees.
  void PublishPrompt(RequestId id);

  // Takes a request out of the scheduler in any phase (finish, cancel, abort, export released),
  // releasing its pages (deferred while a transfer is in flight). NotFound for an unknown id.
  StatusOr<std::unique_ptr<Sequence>> Remove(RequestId id);

  // Times out overdue transfers and Unrefs the pages whose deferred release has come due.
  // Returns how many pages were freed.
  size_t ReclaimDeferred();

  Sequence* Find(RequestId id) const;
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  size_t num_importing() const { return importing_; }
  size_t num_export_held() const { return requests_.size() - waiting_.size() - running_.size() - importing_; }
  size_t num_live() const { return requests_.size(); }
  // Tokens whose KV is still to be computed by a prefill: the queued requests' whole remaining
  // sequences (a preempted one's generated tokens too) and the running ones' unfinished prompts
  // (the prefill backlog the autoscaler reads as tandem_prefill_tokens_waiting). O(live requests).
  size_t prefill_tokens_pending() const;
  // Page references held by live requests' block tables (a leak check adds the prefix cache's and
  // the ledger's and compares with the allocator's refcounts).
  size_t pages_held_by_requests() const;
  const SchedulerCounters& counters() const { return counters_; }
  const SchedulerConfig& config() const { return config_; }
  size_t page_tokens() const { return page_tokens_; }

 private:
  // Makes seq's block table cover kv.num_tokens + n tokens (allocating pages as needed; with a
  // prefix cache, evicting unlocked cached pages when too few are free).
  Status Reserve(Sequence& seq, size_t n);
  // Adopts a cached prefix and reserves the rest; false (nothing held) when it does not fit.
  bool Admit(Sequence& seq);
  // Publishes seq's whole prompt pages to the prefix cache once its prompt is computed (once).
  void Publish(Sequence& seq);
  void ReleasePages(Sequence& seq);
  void Preempt(Sequence& seq);
  void EraseFromQueues(Sequence& seq);
  // Step 1 for one decoding request; false when it did not get a page (preempted or out of pages).
  bool PlanDecode(Sequence& seq, StepPlan* plan);

  SchedulerConfig config_;
  size_t page_tokens_;
  kv::PageAllocator* allocator_;
  kv::IntegrityTracker* tracker_;
  kv::TransferLedger* ledger_;
  kv::PrefixCache* cache_;
  std::unordered_map<RequestId, std::unique_ptr<Sequence>> requests_;
  std::deque<Sequence*> waiting_;   // FCFS; preempted requests rejoin at the front
  std::vector<Sequence*> running_;  // admission order; back() is the most recently admitted
  uint64_t next_admit_order_ = 1;
  size_t importing_ = 0;  // requests in kImporting
  SchedulerCounters counters_;
};

}  // namespace tandem::engine::runtime
