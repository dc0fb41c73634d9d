#pragma once
// The agent's Prometheus series (ARCHITECTURE.md, "Metric names"), on prometheus-cpp. Every
// series carries deployment, pool and role labels; the only other labels are bounded enums
// (reason, direction), never request ids or tenants.
//
//   gauges     tandem_kv_cache_usage_ratio, tandem_kv_cache_capacity_tokens,
//              tandem_kv_cache_used_tokens, tandem_prefix_cache_tokens, tandem_requests_running,
//              tandem_requests_waiting, tandem_prefill_tokens_waiting
//   counters   tandem_kv_integrity_pages_checked_total, tandem_kv_integrity_aborts_total{reason},
//              tandem_requests_finished_total{reason}, tandem_prompt_tokens_total,
//              tandem_generation_tokens_total, tandem_kv_transfer_bytes_total{direction},
//              tandem_kv_transfer_failures_total{reason}, tandem_prefix_cache_queries_total,
//              tandem_prefix_cache_hits_total
//   histograms tandem_time_to_first_token_seconds, tandem_inter_token_latency_seconds,
//              tandem_e2e_request_latency_seconds, tandem_kv_transfer_seconds
//   router     tandem_router_members{target_pool,state}: the pool members the router polled last,
//              ready or not (only a router has these series)
//
// Engine-backed roles feed UpdateFromEngine with EngineLoop::Stats() snapshots (counters advance
// by the difference from the previous snapshot, so they stay monotonic); the router, which has no
// engine, sets its own running/waiting and finished counts. Every series of the list is present
// (at 0) from construction, so dashboards and alerts never see a missing series.
// Thread-safe.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "engine/runtime/engine.h"

namespace tandem::agent::metrics {

// tandem_kv_transfer_failures_total{reason}: a bounded set.
enum class TransferFailure : uint8_t {
  kTagMismatch,      // a page landed with a wrong transfer tag (commit refused)
  kDigestMismatch,   // the landed bytes' digest is not the sender's
  kTimeout,          // the reservation or export passed its deadline
  kAborted,          // ended early: the client went away, the sender failed, the stream broke
  kPeerUnavailable,  // the other agent could not be reached or died mid-transfer
  kLateWrite,        // a page arrived after its transfer ended (refused, never landed)
  kRefusedWrite,     // a page with a wrong index, size or tag (refused)
};
constexpr size_t kNumTransferFailures = 7;
std::string_view TransferFailureName(TransferFailure reason);  // "tag_mismatch", ...

enum class TransferDirection : uint8_t { kIn, kOut };  // label direction="in" | "out"

enum class MemberPool : uint8_t { kPrefill, kDecode };  // label target_pool="prefill" | "decode"

class AgentMetrics {
 public:
  AgentMetrics(std::string deployment, std::string pool, std::string role);
  ~AgentMetrics();
  AgentMetrics(const AgentMetrics&) = delete;
  AgentMetrics& operator=(const AgentMetrics&) = delete;

  // Gauges from the snapshot; counters (finished by reason, integrity, prompt/generation tokens,
  // prefix cache, transfer bytes in = import_bytes and out = export_bytes, and the engine-counted
  // transfer failures: timeouts, late and refused writes) advance by the difference from the last
  // snapshot. A field lower than last time (a rebuilt engine) only resets that baseline, so no
  // series ever goes back. imports_failed and imports_aborted are not counted here: the agent
  // knows which failure it was (tag or digest mismatch, abort, peer) and calls CountTransferFailure.
  void UpdateFromEngine(const engine::runtime::EngineStats& stats);

  // Router (no engine): in-flight and queued requests, and one finished request.
  void SetRequests(int64_t running, int64_t waiting);
  void CountFinished(engine::runtime::FinishReason reason);
  // Router: the members of one pool it polled last, ready or not. No-op on other roles.
  void SetRouterMembers(MemberPool pool, int64_t ready, int64_t not_ready);

  void ObserveTimeToFirstToken(double seconds);
  void ObserveInterTokenLatency(double seconds);
  void ObserveE2eLatency(double seconds);
  // One whole transfer (the sender's or the receiver's view), first page to commit.
  void ObserveTransfer(double seconds);
  // A failure the agent saw itself (the engine-counted ones come with UpdateFromEngine).
  void CountTransferFailure(TransferFailure reason);
  // API roles: tool calls taken out of a response for naming a function the request did not offer.
  void CountDroppedToolCalls(int64_t calls);

  // Prometheus text exposition format 0.0.4 of every series.
  std::string Serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::agent::metrics
