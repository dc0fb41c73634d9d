#include "agent/metrics/agent_metrics.h"

#include <array>
#include <mutex>
#include <utility>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "engine/kv/integrity_tracker.h"
#include "engine/runtime/request_types.h"

namespace tandem::agent::metrics {
namespace {

using engine::runtime::EngineStats;
using engine::runtime::FinishReason;
using prometheus::Counter;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Labels;
using prometheus::Registry;

constexpr size_t kNumFinishReasons = std::tuple_size_v<decltype(EngineStats{}.finished)>;
static_assert(kNumFinishReasons == static_cast<size_t>(FinishReason::kRejected) + 1,
              "EngineStats::finished must have one slot per FinishReason");
static_assert(kNumTransferFailures == static_cast<size_t>(TransferFailure::kRefusedWrite) + 1);
constexpr size_t kNumDirections = 2;

// Time to first token and whole-request latency: a cached short prompt answers in about a
// millisecond, a long prompt behind a queue or a long generation takes minutes.
const Histogram::BucketBoundaries& RequestBuckets() {
  static const Histogram::BucketBoundaries b = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                1,     2.5,    5,     10,   20,    40,   80,  120};
  return b;
}

// One decode step: sub-millisecond for a small model, seconds when a step stalls.
const Histogram::BucketBoundaries& InterTokenBuckets() {
  static const Histogram::BucketBoundaries b = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                0.1,    0.25,  0.5,    1,     2.5,  5};
  return b;
}

// One request's KV over the network: a page or two on a fast link to a long prompt on a slow one
// (the default import deadline is 30 s).
const Histogram::BucketBoundaries& TransferBuckets() {
  static const Histogram::BucketBoundaries b = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  return b;
}

Gauge& MakeGauge(Registry& r, const Labels& constant, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Labels(constant).Register(r).Add({});
}

Counter& MakeCounter(Registry& r, const Labels& constant, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Labels(constant).Register(r).Add({});
}

// One counter per value of a bounded label, all created now so each shows 0 before its first event.
template <size_t N, typename NameOf>
std::array<Counter*, N> MakeCounters(Registry& r, const Labels& constant, const char* name, const char* help,
                                     const char* label, NameOf name_of) {
  auto& family = prometheus::BuildCounter().Name(name).Help(help).Labels(constant).Register(r);
  std::array<Counter*, N> out{};
  for (size_t i = 0; i < N; ++i) out[i] = &family.Add({{label, std::string(name_of(i))}});
  return out;
}

Histogram& MakeHistogram(Registry& r, const Labels& constant, const char* name, const char* help,
                         const Histogram::BucketBoundaries& buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Labels(constant).Register(r).Add({}, buckets);
}

// Advances `counter` by how far the engine's monotonic `now` moved past `*prev`. A lower value
// (a fresh engine behind the same agent) only resets the baseline: the series never goes back.
void Advance(Counter& counter, uint64_t now, uint64_t* prev) {
  if (now > *prev) counter.Increment(static_cast<double>(now - *prev));
  *prev = now;
}

}  // namespace

std::string_view TransferFailureName(TransferFailure reason) {
  switch (reason) {
    case TransferFailure::kTagMismatch: return "tag_mismatch";
    case TransferFailure::kDigestMismatch: return "digest_mismatch";
    case TransferFailure::kTimeout: return "timeout";
    case TransferFailure::kAborted: return "aborted";
    case TransferFailure::kPeerUnavailable: return "peer_unavailable";
    case TransferFailure::kLateWrite: return "late_write";
    case TransferFailure::kRefusedWrite: return "refused_write";
  }
  return "unknown";
}

// tandem_router_members{target_pool,state}, registered on a router only: [pool][ready, not ready].
using RouterMemberGauges = std::array<std::array<Gauge*, 2>, 2>;
RouterMemberGauges MakeRouterMembers(Registry& r, const Labels& constant) {
  RouterMemberGauges out{};
  if (constant.at("role") != "router") return out;
  auto& family =
      prometheus::BuildGauge()
          .Name("tandem_router_members")
          .Help("Pool members the router polled last, by pool and whether they said they were ready.")
          .Labels(constant)
          .Register(r);
  for (const MemberPool pool : {MemberPool::kPrefill, MemberPool::kDecode}) {
    const std::string name = pool == MemberPool::kPrefill ? "prefill" : "decode";
    out[static_cast<size_t>(pool)] = {&family.Add({{"target_pool", name}, {"state", "ready"}}),
                                      &family.Add({{"target_pool", name}, {"state", "not_ready"}})};
  }
  return out;
}

struct AgentMetrics::Impl {
  explicit Impl(Labels c) : constant(std::move(c)) {}

  const Labels constant;
  std::shared_ptr<Registry> registry = std::make_shared<Registry>();
  Registry& r = *registry;

  Gauge& usage_ratio = MakeGauge(r, constant, "tandem_kv_cache_usage_ratio",
                                 "Fraction of the KV cache's token capacity held by requests (0 to 1).");
  Gauge& capacity_tokens =
      MakeGauge(r, constant, "tandem_kv_cache_capacity_tokens", "Tokens the KV cache can hold in all.");
  Gauge& used_tokens = MakeGauge(r, constant, "tandem_kv_cache_used_tokens",
                                 "Tokens' worth of KV cache pages held now (whole pages).");
  Gauge& prefix_cache_tokens = MakeGauge(
      r, constant, "tandem_prefix_cache_tokens",
      "Tokens' worth of KV cache pages the prefix cache keeps for reuse (whole pages, also counted in "
      "tandem_kv_cache_used_tokens; at idle the two are equal).");
  Gauge& running =
      MakeGauge(r, constant, "tandem_requests_running",
                "Requests being served now (scheduled by the engine, or in flight at the router).");
  Gauge& waiting = MakeGauge(r, constant, "tandem_requests_waiting", "Requests queued, not yet running.");
  Gauge& prefill_tokens_waiting =
      MakeGauge(r, constant, "tandem_prefill_tokens_waiting",
                "Prompt tokens queued or admitted whose KV is not computed yet (the prefill backlog).");

  Counter& pages_checked =
      MakeCounter(r, constant, "tandem_kv_integrity_pages_checked_total",
                  "KV pages verified against their request's manifest before a forward step.");
  std::array<Counter*, engine::kv::kNumMismatchReasons> integrity_aborts =
      MakeCounters<engine::kv::kNumMismatchReasons>(
          r, constant, "tandem_kv_integrity_aborts_total",
          "Requests aborted because a KV page failed verification, by the first failing page's reason.",
          "reason", [](size_t i) {
            return engine::kv::MismatchReasonName(static_cast<engine::kv::MismatchReason>(i));
          });
  std::array<Counter*, kNumFinishReasons> finished = MakeCounters<kNumFinishReasons>(
      r, constant, "tandem_requests_finished_total",
      "Requests that ended, by finish reason (stop, length, abort, cancelled, rejected).", "reason",
      [](size_t i) { return engine::runtime::FinishReasonName(static_cast<FinishReason>(i)); });
  Counter& prompt_tokens =
      MakeCounter(r, constant, "tandem_prompt_tokens_total", "Prompt tokens of accepted requests.");
  Counter& generation_tokens =
      MakeCounter(r, constant, "tandem_generation_tokens_total", "Tokens generated and emitted.");
  std::array<Counter*, kNumDirections> transfer_bytes = MakeCounters<kNumDirections>(
      r, constant, "tandem_kv_transfer_bytes_total",
      "KV page bytes moved between agents: in = landed here, out = handed to a peer.", "direction",
      [](size_t i) { return i == static_cast<size_t>(TransferDirection::kIn) ? "in" : "out"; });
  std::array<Counter*, kNumTransferFailures> transfer_failures = MakeCounters<kNumTransferFailures>(
      r, constant, "tandem_kv_transfer_failures_total",
      "KV transfers that failed and page writes refused, by reason.", "reason",
      [](size_t i) { return TransferFailureName(static_cast<TransferFailure>(i)); });
  Counter& prefix_queries = MakeCounter(r, constant, "tandem_prefix_cache_queries_total",
                                        "Admissions that looked up the prefix cache.");
  Counter& prefix_hits = MakeCounter(r, constant, "tandem_prefix_cache_hits_total",
                                     "Prefix cache lookups that matched at least one page.");
  Counter& tool_calls_dropped =
      MakeCounter(r, constant, "tandem_tool_calls_dropped_total",
                  "Tool calls taken out of responses for naming a function the request did not offer.");

  Histogram& ttft =
      MakeHistogram(r, constant, "tandem_time_to_first_token_seconds",
                    "Time from a request's arrival to its first generated token.", RequestBuckets());
  Histogram& inter_token =
      MakeHistogram(r, constant, "tandem_inter_token_latency_seconds",
                    "Time between consecutive generated tokens of a request.", InterTokenBuckets());
  Histogram& e2e = MakeHistogram(r, constant, "tandem_e2e_request_latency_seconds",
                                 "Time from a request's arrival to its last token.", RequestBuckets());
  Histogram& transfer_seconds =
      MakeHistogram(r, constant, "tandem_kv_transfer_seconds",
                    "Time one request's KV transfer took, first page to commit.", TransferBuckets());
  const RouterMemberGauges router_members = MakeRouterMembers(r, constant);

  std::mutex mu;
  EngineStats prev;  // GUARDED_BY(mu): the baseline of every engine-fed counter
};

AgentMetrics::AgentMetrics(std::string deployment, std::string pool, std::string role)
    : impl_(std::make_unique<Impl>(Labels{
          {"deployment", std::move(deployment)}, {"pool", std::move(pool)}, {"role", std::move(role)}})) {}

AgentMetrics::~AgentMetrics() = default;

void AgentMetrics::UpdateFromEngine(const EngineStats& stats) {
  Impl& m = *impl_;
  m.capacity_tokens.Set(static_cast<double>(stats.kv_capacity_tokens));
  m.used_tokens.Set(static_cast<double>(stats.kv_used_tokens));
  const uint64_t page_tokens = stats.pages_total == 0 ? 0 : stats.kv_capacity_tokens / stats.pages_total;
  m.prefix_cache_tokens.Set(static_cast<double>(stats.prefix_cache_pages * page_tokens));
  m.usage_ratio.Set(stats.kv_capacity_tokens == 0 ? 0.0
                                                  : static_cast<double>(stats.kv_used_tokens) /
                                                        static_cast<double>(stats.kv_capacity_tokens));
  m.running.Set(static_cast<double>(stats.running));
  m.waiting.Set(static_cast<double>(stats.waiting));
  m.prefill_tokens_waiting.Set(static_cast<double>(stats.prefill_tokens_waiting));

  std::lock_guard<std::mutex> lock(m.mu);
  EngineStats& p = m.prev;
  for (size_t i = 0; i < kNumFinishReasons; ++i) Advance(*m.finished[i], stats.finished[i], &p.finished[i]);
  for (size_t i = 0; i < engine::kv::kNumMismatchReasons; ++i) {
    Advance(*m.integrity_aborts[i], stats.integrity_aborts[i], &p.integrity_aborts[i]);
  }
  Advance(m.pages_checked, stats.integrity_pages_checked, &p.integrity_pages_checked);
  Advance(m.prompt_tokens, stats.prompt_tokens, &p.prompt_tokens);
  Advance(m.generation_tokens, stats.generation_tokens, &p.generation_tokens);
  Advance(m.prefix_queries, stats.prefix_cache_queries, &p.prefix_cache_queries);
  Advance(m.prefix_hits, stats.prefix_cache_hits, &p.prefix_cache_hits);
  Advance(*m.transfer_bytes[static_cast<size_t>(TransferDirection::kIn)], stats.import_bytes,
          &p.import_bytes);
  Advance(*m.transfer_bytes[static_cast<size_t>(TransferDirection::kOut)], stats.export_bytes,
          &p.export_bytes);
  auto failures = [&m](TransferFailure reason) -> Counter& {
    return *m.transfer_failures[static_cast<size_t>(reason)];
  };
  Advance(failures(TransferFailure::kTimeout), stats.imports_timed_out, &p.imports_timed_out);
  Advance(failures(TransferFailure::kLateWrite), stats.late_transfer_writes, &p.late_transfer_writes);
  Advance(failures(TransferFailure::kRefusedWrite), stats.refused_transfer_writes,
          &p.refused_transfer_writes);
}

void AgentMetrics::SetRequests(int64_t running, int64_t waiting) {
  impl_->running.Set(static_cast<double>(running));
  impl_->waiting.Set(static_cast<double>(waiting));
}

void AgentMetrics::CountFinished(FinishReason reason) {
  const size_t i = static_cast<size_t>(reason);
  if (i < kNumFinishReasons) impl_->finished[i]->Increment();
}

void AgentMetrics::SetRouterMembers(MemberPool pool, int64_t ready, int64_t not_ready) {
  const std::array<Gauge*, 2>& g = impl_->router_members[static_cast<size_t>(pool)];
  if (g[0] == nullptr) return;  // not a router
  g[0]->Set(static_cast<double>(ready));
  g[1]->Set(static_cast<double>(not_ready));
}

void AgentMetrics::ObserveTimeToFirstToken(double seconds) { impl_->ttft.Observe(seconds); }
void AgentMetrics::ObserveInterTokenLatency(double seconds) { impl_->inter_token.Observe(seconds); }
void AgentMetrics::ObserveE2eLatency(double seconds) { impl_->e2e.Observe(seconds); }
void AgentMetrics::ObserveTransfer(double seconds) { impl_->transfer_seconds.Observe(seconds); }

void AgentMetrics::CountTransferFailure(TransferFailure reason) {
  const size_t i = static_cast<size_t>(reason);
  if (i < kNumTransferFailures) impl_->transfer_failures[i]->Increment();
}

void AgentMetrics::CountDroppedToolCalls(int64_t calls) {
  if (calls > 0) impl_->tool_calls_dropped.Increment(static_cast<double>(calls));
}

std::string AgentMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

}  // namespace tandem::agent::metrics
