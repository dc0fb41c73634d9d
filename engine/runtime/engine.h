#pragma once
// Engine: the serving API the agent drives (docs/serving-engine.md). It owns the KV bookkeeping
// (allocator, integrity tracker, transfer ledger), the scheduler and each request's sampler and
// output processor, and runs one forward step per Step() through a ModelExecutor.
//
// Roles:
//   unified       Submit -> prefill and decode here.
//   prefill-only  Submit -> prefill, sample the first token (emitted by Step, no finish), then hold
//                 the request's pages for ExportKv; FinishExport hands it off (or fails it).
//   decode-only   ReserveImport claims pages and issues transfer tags before the prefill side
//                 spends any work; WritePage lands each page (any thread); CommitImport checks the
//                 tags and the digest and starts decoding after the first token; AbortImport or the
//                 reservation's deadline ends it. Pages are freed only once the transfer is terminal.
//
// Every accepted request ends exactly once: a Step output with `finish` set (stop, length, abort,
// cancelled), or, for a prefill-only request handed off, a Step output with `exported` set. When
// integrity is on, the batch is verified (TagTracker::VerifyBatch) before each forward step; a
// failing request is aborted, never run, and the others continue. A Forward error aborts only the
// requests it concerns (the batch is retried one request at a time), and the engine stays usable.
//
// Thread safety: none, except WritePage and KvExport::NextPage, which transfer threads call while
// the step thread runs. One thread calls everything else (EngineLoop's step thread), or calls are
// serialized by the caller; nothing here is global, so one process may hold several engines.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "engine/kv/integrity_tracker.h"
#include "engine/kv/page_convert.h"
#include "engine/kv/transfer_ledger.h"
#include "engine/kv/transfer_tags.h"
#include "engine/runtime/integrity_log.h"
#include "engine/runtime/model_executor.h"
#include "engine/runtime/request.h"
#include "engine/runtime/scheduler.h"

namespace tandem::engine::text {
class Tokenizer;
}

namespace tandem::engine::runtime {

enum class EngineRole : uint8_t { kUnified, kPrefillOnly, kDecodeOnly };
std::string_view EngineRoleName(EngineRole role);  // "unified", "prefill-only", "decode-only"
StatusOr<EngineRole> ParseEngineRole(std::string_view name);

struct EngineConfig {
  ModelExecutor* executor = nullptr;  // not owned; must outlive the engine; its pool is the KV cache
  SchedulerConfig scheduler;
  bool integrity = false;         // TagTracker and VerifyBatch before each step; false: NoopTracker
  bool prefix_cache = false;      // share whole prompt pages between requests of the same tenant
  bool transfer_checksum = true;  // exports digest what they send (else digest() is 0); commits compare
  EngineRole role = EngineRole::kUnified;
  const text::Tokenizer* tokenizer = nullptr;  // optional: text deltas and stop strings
  std::vector<int32_t> eos_token_ids;          // end-of-sequence ids (finish kStop unless ignore_eos)
  uint64_t seed = 0;             // a request without params.seed samples with a seed from (seed, id)
  const Clock* clock = nullptr;  // transfer deadlines; nullptr = SteadyClock::Default()
  // A reservation not committed, or an export not finished, by then is aborted (> 0).
  int64_t import_timeout_ms = 30'000;
};

// The decode side's claim on pages for a request prefilled elsewhere (ReserveImport): what the
// sender needs to land the request's KV here.
struct ImportReservation {
  uint64_t transfer_id = 0;
  RequestId id = 0;
  kv::KvLayout layout;              // the pages' layout here: the sender converts into it
  int64_t num_tokens = 0;           // the prompt's tokens, all in the pages
  std::vector<uint32_t> page_tags;  // one per logical page: WritePage must carry it
  int64_t deadline_nanos = 0;       // engine clock: aborted by Step if not committed by then
};

// One request's KV on its way out of a prefill-only engine (ExportKv): the pages in logical order,
// each converted to the target layout as it is taken, and the digest of every byte handed out.
// The pages stay allocated until Engine::FinishExport, even if the request is cancelled meanwhile.
// NextPage may run on a transfer thread while the step thread runs; one thread at a time.
// REQUIRES: the Engine outlives the export.
class KvExport {
 public:
  RequestId id() const { return id_; }
  int64_t num_tokens() const { return num_tokens_; }
  int32_t first_token() const { return first_token_; }
  size_t num_pages() const { return pages_.size(); }
  size_t pages_sent() const { return next_; }
  const kv::KvLayout& layout() const { return layout_; }
  // Converts the next logical page into `out` (layout().page_bytes): OutOfRange after the last
  // page, InvalidArgument for a wrong size, FailedPrecondition once the export has ended
  // (FinishExport or its deadline: the pages may belong to another request by then).
  Status NextPage(std::span<uint8_t> out);
  int64_t deadline_nanos() const { return deadline_nanos_; }
  // The digest (kv::KvDigest) over every byte NextPage wrote, in order; final after the last page.
  // 0 when the engine's transfer_checksum is off (nothing is digested).
  uint64_t digest() const { return checksum_ ? digest_.Finish() : 0; }

 private:
  friend class Engine;
  KvExport() = default;
  RequestId id_ = 0;
  int64_t num_tokens_ = 0;
  int32_t first_token_ = 0;
  kv::KvLayout layout_;
  std::vector<kv::PageId> pages_;
  size_t page_tokens_ = 0;
  std::unique_ptr<kv::PageConverter> converter_;
  kv::KvDigest digest_;
  bool checksum_ = true;
  size_t next_ = 0;
  std::atomic<uint64_t>* bytes_out_ = nullptr;  // the engine's export_bytes counter
  int64_t deadline_nanos_ = 0;
  std::mutex mu_;  // held by NextPage while it reads, and by the engine to end the export
  bool open_ = true;
};

// A plain snapshot for metrics (names of the agent's Prometheus series in comments).
struct EngineStats {
  uint64_t kv_capacity_tokens = 0;  // tandem_kv_cache_capacity_tokens
  uint64_t kv_used_tokens = 0;      // held pages * page_tokens (tandem_kv_cache_used_tokens)
  uint64_t pages_total = 0;
  uint64_t pages_free = 0;
  uint64_t pages_held = 0;              // by requests, the ledger (deferred) and anything else
  uint64_t pages_deferred = 0;          // parked until their transfer ends
  uint64_t running = 0;                 // tandem_requests_running
  uint64_t waiting = 0;                 // tandem_requests_waiting
  uint64_t prefill_tokens_waiting = 0;  // Scheduler::prefill_tokens_pending (tandem_prefill_tokens_waiting)
  uint64_t export_held = 0;             // prefill-only: prefilled, waiting for ExportKv / FinishExport
  std::array<uint64_t, 5> finished{};   // by FinishReason (tandem_requests_finished_total{reason})
  uint64_t exported = 0;                // prefill-only requests handed off (FinishExport)
  uint64_t export_failures = 0;         // exports that ended failed (FinishExport)
  uint64_t imports_reserved = 0;        // ReserveImport successes
  uint64_t imports_committed = 0;
  uint64_t imports_failed = 0;        // tag or digest mismatch at commit (tandem_kv_transfer_failures_total)
  uint64_t imports_aborted = 0;       // AbortImport
  uint64_t imports_timed_out = 0;     // reservations past their deadline
  uint64_t imports_in_flight = 0;     // gauge: reserved, not yet terminal
  uint64_t import_bytes = 0;          // page bytes landed by WritePage (tandem_kv_transfer_bytes_total)
  uint64_t export_bytes = 0;          // page bytes handed out by KvExport::NextPage
  uint64_t late_transfer_writes = 0;  // WritePage after its transfer ended (refused, never landed)
  uint64_t refused_transfer_writes = 0;  // WritePage with a wrong tag, page index or size
  uint64_t integrity_batches = 0;
  uint64_t integrity_pages_checked = 0;  // tandem_kv_integrity_pages_checked_total
  std::array<uint64_t, kv::kNumMismatchReasons> integrity_aborts{};  // by kv::MismatchReason
  uint64_t prefix_cache_queries =
      0;                           // admissions that looked up the cache (tandem_prefix_cache_queries_total)
  uint64_t prefix_cache_hits = 0;  // of which matched >= 1 page (tandem_prefix_cache_hits_total)
  uint64_t prefix_cache_hit_tokens = 0;
  uint64_t prefix_cache_pages = 0;  // pages the cache holds a reference to
  uint64_t forward_errors = 0;      // requests aborted because Forward failed for them
  uint64_t preemptions = 0;
  uint64_t prompt_tokens = 0;      // of accepted requests (tandem_prompt_tokens_total)
  uint64_t generation_tokens = 0;  // emitted (tandem_generation_tokens_total)
  uint64_t computed_tokens = 0;    // fed to Forward, recomputation included
  uint64_t steps = 0;              // Steps that ran a forward pass
};

class Engine {
 public:
  // InvalidArgument for a missing executor or bad scheduler knobs.
  static StatusOr<std::unique_ptr<Engine>> Create(const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request (FCFS) and returns its id (request.id, or a fresh one when 0).
  // InvalidArgument: empty prompt, a token outside the vocabulary, bad sampling params (named), or
  // stop strings without a tokenizer; AlreadyExists: a live id; FailedPrecondition: decode-only role;
  // OutOfRange: the prompt can never fit in the KV pool (counted as finished kRejected).
  StatusOr<RequestId> Submit(const Request& request);

  // Runs one step: verification, one forward pass over the scheduled batch, sampling. Returns one
  // output per request that got a token, finished, or was cancelled since the last Step.
  std::vector<RequestOutput> Step();

  // Cancels a live request in any phase; its finish (kCancelled) comes with the next Step. Pages
  // are released now, or when its in-flight transfer ends. NotFound for an unknown id.
  Status Cancel(RequestId id);
  // Ends a live request in any phase with finish `abort` and `detail` (next Step), as Cancel does.
  Status Abort(RequestId id, std::string_view detail);

  // ---- prefill-only ----
  // Starts handing out the KV of a request held for export, converted to `target` (the decode
  // pool's layout from its ImportReservation). The pages stay until FinishExport.
  // FailedPrecondition unless it is export-held (or an export of it is already open); DataLoss
  // when integrity is on and its pages fail verification (the request is left for the caller to
  // Cancel); InvalidArgument when `target` cannot take this pool's pages (PageConverter::Create).
  StatusOr<std::shared_ptr<KvExport>> ExportKv(RequestId id, const kv::KvLayout& target);
  // Ends the request's export: kDone hands it off (its pages are freed, the next Step emits an
  // output with `exported` set); kFailed or kTimedOut aborts it. FailedPrecondition when no
  // export of `id` is open. An export not finished within import_timeout_ms is ended by Step
  // (kTimedOut).
  Status FinishExport(RequestId id, kv::TransferState terminal);

  // ---- decode-only ----
  // Claims the pages of a request that another engine prefills: allocates pages for its prompt
  // (registering the manifest), issues one transfer tag per page and a deadline. Nothing is
  // scheduled until CommitImport. InvalidArgument: bad tokens or params; OutOfRange: it can never
  // fit; ResourceExhausted: not enough free pages or running slots now; FailedPrecondition: not
  // decode-only, or an FP8 pool whose scales are not fixed (LayoutOf).
  StatusOr<ImportReservation> ReserveImport(const Request& request);
  // Lands logical page `logical_page` of a reserved transfer (bytes in the reservation's layout);
  // the page's transfer tag is stamped after the data. Thread-safe: transfer threads call it while
  // the step thread runs. FailedPrecondition (counted as a late write) when the transfer has ended
  // or is unknown, so a late write never lands in a page given to another request;
  // InvalidArgument (counted as refused) for a page index, size or tag that is not the
  // reservation's.
  Status WritePage(uint64_t transfer_id, uint32_t logical_page, std::span<const uint8_t> bytes, uint32_t tag);
  // Every page landed with its tag and `digest` (the sender's KvExport::digest) equal to the digest
  // of the landed pages: the request starts decoding after `first_token` (which counts toward
  // max_tokens and stop checks but is not emitted again; if it already ends the request, the next
  // Step emits the finish). Otherwise the request is aborted (next Step) and DataLoss (tags,
  // digest) or InvalidArgument (first token, pages missing) is returned. FailedPrecondition when
  // the transfer is not open.
  Status CommitImport(uint64_t transfer_id, int32_t first_token, uint64_t digest);
  // Ends a reserved transfer: the request is aborted (next Step, finish_detail names `reason`) and
  // its pages are freed. FailedPrecondition when the transfer is not open.
  Status AbortImport(uint64_t transfer_id, std::string_view reason);

  // ---- transfers (deferred release) ----
  // A transfer into or out of `id`'s pages starts / reaches its terminal state. While one is in
  // flight, releasing the request parks its pages; they are freed on the first Step after it ends.
  // (ExportKv and ReserveImport register theirs with ids of their own, at 2^63 and above.)
  Status BeginTransfer(uint64_t transfer_id, RequestId id, int64_t timeout_ms);
  Status FinishTransfer(uint64_t transfer_id, kv::TransferState terminal);

  // The earliest import or export deadline (engine clock), or nullopt: when an idle step loop
  // must wake. Step thread.
  std::optional<int64_t> NextDeadlineNanos() const;

  EngineStats Stats() const;
  EngineRole role() const { return config_.role; }
  const Clock& clock() const { return *config_.clock; }

  // For tests and invariant checks.
  const Scheduler& scheduler() const { return *scheduler_; }
  const kv::PageAllocator& allocator() const { return *allocator_; }
  const kv::TransferLedger& ledger() const { return *ledger_; }
  const kv::PrefixCache* prefix_cache() const { return cache_.get(); }  // nullptr when off
  kv::IntegrityTracker* tracker_for_testing() { return tracker_.get(); }
  // Fault injection only (PageAllocator::Inject*): never for serving code.
  kv::PageAllocator* allocator_for_testing() { return allocator_.get(); }

 private:
  struct RequestState;
  explicit Engine(const EngineConfig& config);
  Status ValidateTokens(std::span<const int32_t> tokens, std::string_view what) const;
  StatusOr<RequestId> AssignId(RequestId wanted);
  StatusOr<std::unique_ptr<RequestState>> MakeState(const Request& request, RequestId id) const;
  // Ends a live request: flushes its text, removes it (releasing pages), counts the reason.
  void FinishRequest(RequestId id, FinishReason reason, std::string_view detail,
                     std::vector<RequestOutput>* outputs);
  void VerifyPlan(StepPlan* plan, std::vector<RequestOutput>* outputs);
  // Runs the chunks, sets logits rows; aborts requests whose Forward fails (rows left empty).
  void RunForward(const std::vector<ScheduledChunk>& chunks, std::vector<std::vector<float>>* rows,
                  std::vector<RequestOutput>* outputs);
  void SampleAndEmit(Sequence& seq, std::span<const float> logits, std::vector<RequestOutput>* outputs);
  struct Import;
  Status End(RequestId id, FinishReason reason, std::string_view detail);  // Cancel, Abort
  // Ends an open import (under its lock): its ledger transfer, the request (aborted unless it
  // started decoding), the counters.
  void EndImport(uint64_t transfer_id, kv::TransferState terminal, std::string_view reason);
  void ExpireImports();
  uint64_t NextTransferId() { return (uint64_t{1} << 63) | next_transfer_++; }

  EngineConfig config_;
  std::unique_ptr<kv::IntegrityTracker> tracker_;
  std::unique_ptr<kv::PageAllocator> allocator_;
  std::unique_ptr<kv::TransferLedger> ledger_;
  std::unique_ptr<kv::PrefixCache> cache_;  // after the allocator, before the scheduler (teardown order)
  std::unique_ptr<Scheduler> scheduler_;
  std::unordered_map<RequestId, std::unique_ptr<RequestState>> states_;
  std::vector<RequestOutput> pending_outputs_;  // cancellations, delivered by the next Step
  RequestId next_id_ = 1;
  kv::TransferTagIssuer tags_;
  uint64_t next_transfer_ = 1;
  // Open imports, by transfer id. The map's mutex guards the map; each Import has its own lock,
  // held by WritePage while it copies, so ending an import waits for a copy in progress.
  mutable std::mutex imports_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<Import>> imports_;
  std::unordered_map<RequestId, std::pair<uint64_t, std::shared_ptr<KvExport>>> exports_;
  std::atomic<uint64_t> late_writes_{0}, refused_writes_{0}, import_bytes_{0}, export_bytes_{0};
  EngineStats counters_;  // the monotonic fields; Stats() fills in the gauges
  // VerifyPlan's incident lines (one per integrity abort, rate-limited).
  IntegrityIncidentLog incident_log_;
};

}  // namespace tandem::engine::runtime
