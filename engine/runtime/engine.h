#pragma once
// Engine: the serving API the agent drives (docs/serving-engine.md). It owns the KV bookkeeping
// (allocator, integrity tracker, transfer ledger), the scheduler and each request's sampler and
// output processor, and runs one forward step per Step() through a ModelExecutor.
//
// Roles:
//   unified       Submit -> prefill and decode here.
//   prefill-only  Submit -> prefill, sample the first token (emitted by Step, no finish), then hold
//                 the request's pages for ExportKv until ReleaseExported (or Cancel); pages in an
//                 in-flight transfer (BeginTransfer) are freed only when it reaches a terminal state.
//   decode-only   ImportKv -> copy transferred pages in, continue decoding after the first token.
//
// Every accepted request ends exactly once: a Step output with `finish` set (stop, length, abort,
// cancelled), or, for a prefill-only request handed off, ReleaseExported. When integrity is on,
// the batch is verified (TagTracker::VerifyBatch) before each forward step; a failing request is
// aborted, never run, and the others continue. A Forward error aborts only the requests it
// concerns (the batch is retried one request at a time), and the engine stays usable.
//
// Thread safety: none. One thread (the agent's step thread) calls everything, or calls are
// serialized by the caller; nothing here is global, so one process may hold several engines.

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "engine/kv/integrity_tracker.h"
#include "engine/kv/transfer_ledger.h"
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
  bool integrity = false;     // TagTracker and VerifyBatch before each step; false: NoopTracker
  bool prefix_cache = false;  // share whole prompt pages between requests of the same tenant
  EngineRole role = EngineRole::kUnified;
  const text::Tokenizer* tokenizer = nullptr;  // optional: text deltas and stop strings
  std::vector<int32_t> eos_token_ids;          // end-of-sequence ids (finish kStop unless ignore_eos)
  uint64_t seed = 0;             // a request without params.seed samples with a seed from (seed, id)
  const Clock* clock = nullptr;  // transfer deadlines; nullptr = SteadyClock::Default()
};

// The KV of one prefilled request, as ExportKv hands it out and ImportKv takes it in.
struct KvPayload {
  KvCacheDtype dtype = KvCacheDtype::kBf16;
  kv::KvShape shape;
  size_t page_tokens = 0;
  size_t page_bytes = 0;
  int64_t num_tokens = 0;   // the prompt's tokens, all in the pages
  int32_t first_token = 0;  // sampled by the prefill side
  // FP8 pools: the per-layer scales the codes were written with ([num_layers]); empty for BF16.
  // ImportKv requires the receiving pool's scales to be fixed and equal (both pools configured
  // with the checkpoint's fp8_layer_scales); anything else is a conversion, the transfer's job.
  std::vector<float> fp8_layer_scales;
  // kv::DigestKv over the first num_tokens tokens in logical order (independent of the physical
  // pages); ImportKv recomputes it over the copied pages before accepting them.
  uint64_t digest = 0;
  // Logical page order; each page_bytes long in PagePool layout [layers][page_tokens][row] (the
  // slots past num_tokens in the last page are don't-care).
  std::vector<std::vector<uint8_t>> pages;
};

// A plain snapshot for metrics (names of the agent's Prometheus series in comments).
struct EngineStats {
  uint64_t kv_capacity_tokens = 0;  // tandem_kv_cache_capacity_tokens
  uint64_t kv_used_tokens = 0;      // held pages * page_tokens (tandem_kv_cache_used_tokens)
  uint64_t pages_total = 0;
  uint64_t pages_free = 0;
  uint64_t pages_held = 0;             // by requests, the ledger (deferred) and anything else
  uint64_t pages_deferred = 0;         // parked until their transfer ends
  uint64_t running = 0;                // tandem_requests_running
  uint64_t waiting = 0;                // tandem_requests_waiting
  uint64_t export_held = 0;            // prefill-only: prefilled, waiting for ReleaseExported
  std::array<uint64_t, 5> finished{};  // by FinishReason (tandem_requests_finished_total{reason})
  uint64_t exported = 0;               // prefill-only requests handed off by ReleaseExported
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

  // ---- prefill-only ----
  // The KV of a request held for export, with its digest. FailedPrecondition unless it is
  // export-held; DataLoss when integrity is on and its pages fail verification (the request is
  // left for the caller to Cancel); Unimplemented for a model with state outside the pages.
  StatusOr<KvPayload> ExportKv(RequestId id);
  // Hands the request off: its pages are freed (after any in-flight transfer ends).
  Status ReleaseExported(RequestId id);

  // ---- decode-only ----
  // Takes a request prefilled elsewhere: allocates pages, copies `payload` in (manifest
  // registered), and continues decoding after payload.first_token (which counts toward
  // max_tokens and stop checks but is not emitted again). Returns the request's id.
  // InvalidArgument: dtype, shape, page size or token count mismatch (dtype conversion is the
  // transfer's job), bad tokens or params; DataLoss: the copied KV does not match payload.digest;
  // ResourceExhausted: not enough free pages or running slots now; FailedPrecondition: not
  // decode-only, or the first token already ends the request; Unimplemented: a model with state
  // outside the pages (GLM's indexer keys).
  StatusOr<RequestId> ImportKv(const Request& request, const KvPayload& payload);

  // ---- transfers (deferred release) ----
  // A transfer into or out of `id`'s pages starts / reaches its terminal state. While one is in
  // flight, releasing the request parks its pages; they are freed on the first Step after it ends.
  Status BeginTransfer(uint64_t transfer_id, RequestId id, int64_t timeout_ms);
  Status FinishTransfer(uint64_t transfer_id, kv::TransferState terminal);

  EngineStats Stats() const;
  EngineRole role() const { return config_.role; }

  // For tests and invariant checks.
  const Scheduler& scheduler() const { return *scheduler_; }
  const kv::PageAllocator& allocator() const { return *allocator_; }
  const kv::TransferLedger& ledger() const { return *ledger_; }
  const kv::PrefixCache* prefix_cache() const { return cache_.get(); }  // nullptr when off
  kv::IntegrityTracker* tracker_for_testing() { return tracker_.get(); }

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

  EngineConfig config_;
  std::unique_ptr<kv::IntegrityTracker> tracker_;
  std::unique_ptr<kv::PageAllocator> allocator_;
  std::unique_ptr<kv::TransferLedger> ledger_;
  std::unique_ptr<kv::PrefixCache> cache_;  // after the allocator, before the scheduler (teardown order)
  std::unique_ptr<Scheduler> scheduler_;
  std::unordered_map<RequestId, std::unique_ptr<RequestState>> states_;
  std::vector<RequestOutput> pending_outputs_;  // cancellations, delivered by the next Step
  RequestId next_id_ = 1;
  EngineStats counters_;  // the monotonic fields; Stats() fills in the gauges
};

}  // namespace tandem::engine::runtime
